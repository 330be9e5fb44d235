# a hand-written program: aliases, decimal offsets, comments, CRLF, repeated sections
.machine neuroncore-v2
  .semaphores   0x40   ; hex is fine

.engine dve
	tensor_scalar signal=s4 wait=s3>=1 imm1=-1 op1=add imm0=2.5 op0=mult in0=psum[0:128]+0:float32[[1,512]] dst=sbuf[0:128]+256:BF16[[1,512]]
.engine sp
    dma_copy dst=sbuf[0:128]:bf16[[1,512]] in0=hbm[0:128:512]+4096:bf16[[1,512]] queue=2 signal=s0
    reg_set rd=r1 imm_i0=0x5
    branch op0=lt ra=r1 imm_i1=10 imm_i0=3 flags=imm#loop
.engine vector
    memset dst=psum[0:1]+0:fp32[[1,1]] imm0=0x7fc00001
    memset imm0=7 dst=sbuf[0:1]+0:int32[[1,1]]
    tensor_scalar imm0=255 op0=bitwise_and imm1=-2 dst=sbuf[0:1]+0:int32[[1,1]]
    iota dst=sbuf[0:128]+0:int32[[1,8]] imm0=-3
.engine act
    activation dst=sbuf[0:128]+0+r3:fp32[[1,64],[-64,2]] in0=sbuf[0:128]+0:fp32[] func=gelu imm0=1 flags=reduce|s0_ap
.engine pe
    multiply_moving dst=psum[0:128]+0:fp32[[1,512]] in0=sbuf[0:128]+0:bf16[[1,512]] flags=acc
