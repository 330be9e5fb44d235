.machine trainium3
.semaphores 64
.tensor lhsT input bf16 [128,128] @0x1000
.tensor rhs input bf16 [128,128] @0x9000
.tensor out output bf16 [128,128] @0x11000

.engine tensor
    load_stationary in0=sbuf[0:128]+0x200:bf16[[1,128]] wait=s6>=1 signal=s0
    multiply_moving dst=psum[0:128]+0:fp32[[1,128]] in0=sbuf[0:128]+0x100:bf16[[1,128]] wait=s5>=1 signal=s0

.engine vector
    memset dst=sbuf[0:128]+0:bf16[[1,128]] signal=s1
    tensor_tensor dst=sbuf[0:128]+0:bf16[[1,128]] in0=sbuf[0:128]+0:bf16[[1,128]] in1=psum[0:128]+0:fp32[[1,128]] op0=add wait=s0>=2 signal=s1
    tensor_copy dst=sbuf[0:128]+0x300:bf16[[1,128]] in0=sbuf[0:128]+0:bf16[[1,128]] signal=s1

.engine sync
    dma_copy dst=sbuf[0:128]+0x100:bf16[[1,128]] in0=hbm[0:1]+0x9000:bf16[[128,128],[1,128]] signal=s5
    dma_copy dst=sbuf[0:128]+0x200:bf16[[1,128]] in0=hbm[0:1]+0x1000:bf16[[128,128],[1,128]] queue=1 signal=s6
    dma_copy dst=hbm[0:1]+0x11000:bf16[[128,128],[1,128]] in0=sbuf[0:128]+0x300:bf16[[1,128]] queue=2 wait=s1>=3 signal=s7
