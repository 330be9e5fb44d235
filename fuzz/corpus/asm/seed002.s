.semaphores 3359303752
.tensor aoo-eq scratch uint8 [2183,1261988079,2098] @0xb90e1
.tensor b_J953qj7je scratch uint32 [3252,1522] @0xf3073
.tensor cqdJ input int32 [3699,2018,231] @0x465f6

.engine tensor
    sem_wait dst=psum[63171:38948]+0:uint16[] in0=none[121:47758]+0x48c91503030c9e1f:fp8_e4m3[[-2147483647,3142890191],[-463979488,4248367153],[433354256,1643936558],[-1748058929,2147483647]] in1=sbuf[973:33463]+0:uint8[] op0=is_gt imm0=473366004 op1=bitwise_or imm1=-655 func=gelu rd=r248 ra=r241 rb=r182 imm_i0=-8388608 imm_i1=1543584189 queue=13 flags=negate|reduce|double_row|s0_ap|s1_ap

.engine scalar
    nop in0=none[31:58329:5290025896329186839]+0xebfb7b28595a9b23:int32[[-745,1836499766],[907468220,1490147716],[1331087755,765]] op0=add imm0=-1977293205 op1=abs_min imm1=-836 func=sqrt rd=r26 ra=r54 rb=r108 imm_i0=-2147483648 imm_i1=694 queue=7 flags=acc|negate|reduce wait=s2>=4294966480 signal=s200

.engine gpsimd
    tensor_scalar dst=psum[120:63:-6809402986427468010]+0xf86a338582c75f98+r195:fp16[[1896138635,2179814172],[1482569293,1560451740],[117078634,486],[77,3669869342]] in0=sbuf[7:3956]+0x98f45+r129:uint16[] in2=psum[113:36330]+0:uint32[[8388608,246]] op0=abs_max imm0=7.88931035e-43 op1=add imm1=6.54981497e-25 func=softplus rd=r191 ra=r249 rb=r149 imm_i0=2143289345 imm_i1=271 queue=13 flags=acc|rev0|negate|double_row

.engine sync
    branch dst=sbuf[56132:16203]+0x590d2e36067658ad+r20:fp8_e5m2[] in1=hbm[24:51]+0x992c0ff1879737d9+r54:uint32[[-4194304,310437103],[-903,2695988815]] extra=hbm[22498:81]+0xcd32ed26843ff221:fp8_e4m3[[-344,1075838976]] op0=gt imm0=8388607 op1=logical_xor imm1=1806910627 func=relu rd=r43 ra=r61 rb=r59 imm_i0=2139095040 imm_i1=-2147483647 queue=7 flags=acc|rev1|negate|reduce|double_row|imm wait=s0>=631
