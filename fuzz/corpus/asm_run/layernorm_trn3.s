.machine trainium3
.semaphores 64
.tensor in input bf16 [64,128] @0x1000
.tensor gamma input bf16 [1,128] @0x5000
.tensor beta input bf16 [1,128] @0x5100
.tensor out output bf16 [64,128] @0x5200

.engine vector
    bn_stats dst=sbuf[0:64]+0x420:fp32[[1,6]] in0=sbuf[0:64]+0x220:fp32[[1,128]] wait=s7>=1 signal=s1
    bn_aggr dst=sbuf[0:64]+0x440:fp32[[1,2]] in0=sbuf[0:64]+0x420:fp32[[1,6]] signal=s1
    tensor_scalar dst=sbuf[0:64]+0x220:fp32[[1,128]] in0=sbuf[0:64]+0x220:fp32[[1,128]] in1=sbuf[0:64]+0x440:fp32[[1,1]] in2=sbuf[0:64]+0x448:fp32[[1,1]] op0=subtract op1=mult flags=s0_ap|s1_ap wait=s2>=1 signal=s1
    tensor_tensor dst=sbuf[0:64]+0x220:fp32[[1,128]] in0=sbuf[0:64]+0x220:fp32[[1,128]] in1=sbuf[0:64]+0x20:bf16[[1,128]] op0=mult wait=s5>=1 signal=s1
    tensor_tensor dst=sbuf[0:64]+0x220:fp32[[1,128]] in0=sbuf[0:64]+0x220:fp32[[1,128]] in1=sbuf[0:64]+0x120:bf16[[1,128]] op0=add wait=s6>=1 signal=s1

.engine scalar
    sem_wait wait=s1>=2
    activation dst=sbuf[0:64]+0x448:fp32[[1,1]] in0=sbuf[0:64]+0x444:fp32[[1,1]] in1=sbuf[0:64]+0:fp32[[1,1]] imm0=1.0 func=rsqrt wait=s3>=1 signal=s2
    dma_copy dst=hbm[0:1]+0x5200:bf16[[128,64],[1,128]] in0=sbuf[0:64]+0x220:fp32[[1,128]] queue=12 wait=s1>=5 signal=s17

.engine gpsimd
    memset dst=sbuf[0:64]+0:fp32[[1,1]] imm0=9.99999975e-06 signal=s3

.engine sync
    dma_copy dst=sbuf[0:64]+0x20:bf16[[1,128]] in0=hbm[0:64]+0x5000:bf16[[1,128]] signal=s5
    dma_copy dst=sbuf[0:64]+0x120:bf16[[1,128]] in0=hbm[0:64]+0x5100:bf16[[1,128]] queue=1 signal=s6
    dma_copy dst=sbuf[0:64]+0x220:fp32[[1,128]] in0=hbm[0:1]+0x1000:bf16[[128,64],[1,128]] queue=2 signal=s7
