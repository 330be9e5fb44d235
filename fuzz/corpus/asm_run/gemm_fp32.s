.machine trn1.2xlarge
.semaphores 64
.tensor lhsT input fp32 [256,128] @0x1000
.tensor rhs input fp32 [256,64] @0x21000
.tensor out output fp32 [128,64] @0x31000

.engine tensor
    load_stationary in0=sbuf[0:128]+0x300:fp32[[1,128]] wait=s7>=1 signal=s0
    multiply_moving dst=psum[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0x100:fp32[[1,64]] wait=s5>=1 signal=s0
    load_stationary in0=sbuf[0:128]+0x500:fp32[[1,128]] wait=s8>=1 signal=s0
    multiply_moving dst=psum[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0x200:fp32[[1,64]] flags=acc wait=s6>=1 signal=s0

.engine vector
    memset dst=sbuf[0:128]+0:fp32[[1,64]] signal=s1
    tensor_tensor dst=sbuf[0:128]+0:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] in1=psum[0:128]+0:fp32[[1,64]] op0=add wait=s0>=4 signal=s1
    tensor_copy dst=sbuf[0:128]+0x700:fp32[[1,64]] in0=sbuf[0:128]+0:fp32[[1,64]] signal=s1

.engine sync
    dma_copy dst=sbuf[0:128]+0x100:fp32[[1,64]] in0=hbm[0:1]+0x21000:fp32[[64,128],[1,64]] signal=s5
    dma_copy dst=sbuf[0:128]+0x200:fp32[[1,64]] in0=hbm[0:1]+0x29000:fp32[[64,128],[1,64]] queue=1 signal=s6
    dma_copy dst=sbuf[0:128]+0x300:fp32[[1,128]] in0=hbm[0:1]+0x1000:fp32[[128,128],[1,128]] queue=2 signal=s7
    dma_copy dst=sbuf[0:128]+0x500:fp32[[1,128]] in0=hbm[0:1]+0x11000:fp32[[128,128],[1,128]] queue=3 signal=s8
    dma_copy dst=hbm[0:1]+0x31000:fp32[[64,128],[1,64]] in0=sbuf[0:128]+0x700:fp32[[1,64]] queue=4 wait=s1>=3 signal=s9
