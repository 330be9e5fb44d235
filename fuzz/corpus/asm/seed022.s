.machine sgHxoLuZ_.z9P
.semaphores 32
.tensor a3q5ZKOPz scratch bf16 [3939,3028] @0x8000000000000000
.tensor bRTKYmasvm scratch bf16 [4710,4247,1489] @0xc6d3abac36c36833

.engine tensor
    multiply_moving dst=hbm[8620:63:-6312175760065278021]+0x73ea7:fp32[[196,329]] in1=psum[30560:123:-9081550771353530979]+0xbde1403665ef2c56:bf16[] extra=psum[24789:5393]+0xffffffffffffffff:int8[[1075838976,2139095041],[1075838976,4294967222]] op0=min imm0=0xffffffff op1=min imm1=0xffffff6f rd=r153 ra=r120 rb=r7 imm_i0=-171 imm_i1=2139095039 queue=12 flags=rev0|negate|double_row|imm wait=s123>=4290772992
    transpose_pe in0=psum[46027:50947]+0x366ee:fp32[[1104776494,3745750522],[-811947366,1163482933],[832,4294967019],[898,237864556]] in1=psum[76:96]+0x8000000000000000:uint8[] wait=s145>=0 signal=s222
    reg_alu dst=hbm[35:15674]+0xe6969+r150:tf32[[-57100217,3900084470],[-1687749202,20],[2085485803,232690598],[352663711,0]] in0=sbuf[77:90:347058]+0xa57b44e6db4f2e9e:int16[[970458422,4294966598],[-826665837,1326089204],[-1,3182418142]] in1=hbm[31:13138]+0xd6cba:int16[[2139095039,29]] in2=psum[49:30928]+0+r13:fp16[[364035264,1729226246],[-179,1]] op0=not_equal imm0=-367 op1=logical_or imm1=213159824 func=sin rd=r8 ra=r124 rb=r34 imm_i0=-984512191 imm_i1=-1251032120 queue=1 flags=acc|rev1|negate|reduce wait=s234>=143

.engine vector
    barrier in2=psum[5492:37427]+0x60dd4:tf32[[-8388608,923434072]] extra=hbm[55:29521]+0xffffffffffffffff:int16[[2048781340,687]] op0=logical_and imm0=-8388608 op1=logical_or imm1=209035338 func=gelu_apprx_tanh rd=r116 ra=r212 rb=r177 imm_i0=832 imm_i1=-674996486 queue=3 flags=rev0|negate|reduce|s0_ap wait=s169>=1051372203 signal=s101
    bn_aggr in1=none[50:33756]+0x8000000000000000:bf16[[-753290812,4294966756]] in2=hbm[48628:57]+0:fp8_e4m3_neuron[[302,2139095040],[-661,499775725],[-4194304,285015268]] op0=average imm0=-9.78490911e-35 op1=bitwise_xor imm1=1.17549421e-38 func=softplus rd=r187 ra=r101 rb=r240 imm_i0=-733 imm_i1=1963223354 queue=8 flags=acc|rev1|negate|reduce|double_row|imm|s0_ap wait=s176>=3151491299 signal=s101

.engine scalar
    nop in0=none[98:80]+0x8000000000000000:tf32[[1065353216,3349339509],[669,3224341880],[-352654098,1283648408],[-776,736337681]] op0=pow imm0=-194 op1=is_gt imm1=-318 rd=r97 ra=r10 rb=r56 imm_i0=2143289344 imm_i1=-78 queue=12 flags=reduce|double_row|s0_ap|s1_ap wait=s234>=1075838976
    reg_alu in1=none[16249:62909:604344]+0x163bc:fp8_e4m3[[1036831949,331017885],[508,3977646662],[2143289345,1581424262],[1973568747,3328619005]] in2=none[64432:86:-6887580879999317048]+0:fp8_e4m3_neuron[[1075838976,178],[-4194304,8388607],[635,4294966698]] extra=sbuf[40404:119]+0x5530ebab920084aa+r69:int8[] op0=not_equal imm0=2047675998 op1=min imm1=-666177943 func=relu rd=r81 ra=r86 rb=r81 imm_i0=2051239444 imm_i1=-1189737593 queue=6 flags=reduce|double_row wait=s210>=4294966353

.engine gpsimd
    sem_signal in2=hbm[8:40735]+0xffffffffffffffff:fp8_e5m2[[-98,4200539783],[-2031658613,4294967021]] extra=hbm[89:97]+0xffffffffffffffff:bf16[[-1220714377,66],[1759286730,425834252]] wait=s39>=2139095040 signal=s37
