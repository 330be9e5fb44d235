.machine trn2.48xlarge
.semaphores 64
.tensor in input fp32 [256,32] @0x1000
.tensor out output fp32 [256,32] @0x9000

.engine vector
    tensor_reduce dst=sbuf[0:128]+0x100:fp32[[1,1]] in0=sbuf[0:128]+0:fp32[[1,32]] op0=max imm_i0=1 flags=negate wait=s5>=1 signal=s1
    reciprocal dst=sbuf[0:128]+0x108:fp32[[1,1]] in0=sbuf[0:128]+0x104:fp32[[1,1]] wait=s2>=1 signal=s1
    tensor_scalar dst=sbuf[0:128]+0:fp32[[1,32]] in0=sbuf[0:128]+0:fp32[[1,32]] in1=sbuf[0:128]+0x108:fp32[[1,1]] op0=mult flags=s0_ap signal=s1
    tensor_reduce dst=sbuf[0:128]+0x120:fp32[[1,1]] in0=sbuf[0:128]+0x80:fp32[[1,32]] op0=max imm_i0=1 flags=negate wait=s6>=1 signal=s1
    reciprocal dst=sbuf[0:128]+0x128:fp32[[1,1]] in0=sbuf[0:128]+0x124:fp32[[1,1]] wait=s2>=2 signal=s1
    tensor_scalar dst=sbuf[0:128]+0x80:fp32[[1,32]] in0=sbuf[0:128]+0x80:fp32[[1,32]] in1=sbuf[0:128]+0x128:fp32[[1,1]] op0=mult flags=s0_ap signal=s1

.engine scalar
    sem_wait wait=s1>=1
    activation dst=sbuf[0:128]+0:fp32[[1,32]] in0=sbuf[0:128]+0:fp32[[1,32]] in1=sbuf[0:128]+0x100:fp32[[1,1]] extra=sbuf[0:128]+0x104:fp32[[1,1]] imm0=1.0 func=exp flags=reduce wait=s5>=1 signal=s2
    sem_wait wait=s1>=4
    activation dst=sbuf[0:128]+0x80:fp32[[1,32]] in0=sbuf[0:128]+0x80:fp32[[1,32]] in1=sbuf[0:128]+0x120:fp32[[1,1]] extra=sbuf[0:128]+0x124:fp32[[1,1]] imm0=1.0 func=exp flags=reduce wait=s6>=1 signal=s2

.engine sync
    dma_copy dst=sbuf[0:128]+0:fp32[[1,32]] in0=hbm[0:1]+0x1000:fp32[[32,128],[1,32]] signal=s5
    dma_copy dst=sbuf[0:128]+0x80:fp32[[1,32]] in0=hbm[0:1]+0x5000:fp32[[32,128],[1,32]] queue=1 signal=s6
    dma_copy dst=hbm[0:1]+0x9000:fp32[[32,128],[1,32]] in0=sbuf[0:128]+0:fp32[[1,32]] queue=2 wait=s1>=3 signal=s7
    dma_copy dst=hbm[0:1]+0xd000:fp32[[32,128],[1,32]] in0=sbuf[0:128]+0x80:fp32[[1,32]] queue=3 wait=s1>=6 signal=s8
