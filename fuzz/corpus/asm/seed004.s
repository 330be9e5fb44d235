.semaphores 32

.engine tensor
    sem_signal in0=none[122:53871]+0x8000000000000000:fp8_e5m2[[1804788993,946633528],[-1277617322,4258038160],[-228,710],[772068391,3889012465]] in2=none[10447:64:1023930]+0x149f3:fp8_e4m3_neuron[] extra=hbm[19349:33]+0xd00b0:fp8_e4m3[[-602897578,1874972302]] op0=is_gt imm0=-2147483648 op1=abs imm1=-8388608 func=silu rd=r195 ra=r92 rb=r126 imm_i0=-1327636095 imm_i1=2120386585 queue=8 flags=rev0|negate|reduce|double_row|imm|s1_ap wait=s151>=4294966787
