.machine trn1.2xlarge
.semaphores 64
.tensor in input bf16 [128,64] @0x1000
.tensor out output bf16 [128,64] @0x5000

.engine vector
    tensor_reduce dst=sbuf[0:128]+0x100:fp32[[1,1]] in0=sbuf[0:128]+0:fp32[[1,64]] op0=max imm_i0=1 flags=negate wait=s5>=1 signal=s1
    reciprocal dst=sbuf[0:128]+0x108:fp32[[1,1]] in0=sbuf[0:128]+0x104:fp32[[1,1]] wait=s2>=1 signal=s1
    tensor_scalar dst=sbuf[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] in1=sbuf[0:128]+0x108:fp32[[1,1]] op0=mult flags=s0_ap signal=s1

.engine scalar
    sem_wait wait=s1>=1
    activation dst=sbuf[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] in1=sbuf[0:128]+0x100:fp32[[1,1]] extra=sbuf[0:128]+0x104:fp32[[1,1]] imm0=1.0 func=exp flags=reduce wait=s5>=1 signal=s2

.engine sync
    dma_copy dst=sbuf[0:128]+0:fp32[[1,64]] in0=hbm[0:1]+0x1000:bf16[[64,128],[1,64]] signal=s5
    dma_copy dst=hbm[0:1]+0x5000:bf16[[64,128],[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] queue=1 wait=s1>=3 signal=s6
