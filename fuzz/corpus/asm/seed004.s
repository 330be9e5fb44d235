.machine tRFg
.semaphores 32
.tensor a.NX1WqC scratch fp8_e4m3 [4063,4069] @0x64f3d
