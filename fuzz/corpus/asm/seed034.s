.machine vqEFVW8acJKl.qpe.7n
.semaphores 4294967147

.engine scalar
    dma_copy dst=psum[71:123]+0xff822:uint8[] in1=hbm[111:18809]+0x1b754:fp32[] in2=psum[55711:111]+0xf8cbf375c53530aa+r43:fp8_e4m3_neuron[[-1161091174,2147483649],[2147467242,1507625844],[417351473,2144676010]] extra=hbm[65:7:737782]+0x6782a+r178:bf16[[2143289345,2147483647]] op0=average imm0=0x7f800001 op1=add imm1=0x7fc00001 func=sin rd=r39 ra=r207 rb=r145 imm_i0=2077208374 imm_i1=-1148910165 queue=6 flags=acc|rev1|negate|double_row|imm|s0_ap|s1_ap signal=s98
