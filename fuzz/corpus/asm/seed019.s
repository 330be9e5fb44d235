.machine bg8Q
.semaphores 32
.tensor a. input fp32 [3029,827,4598] @0x277df

.engine tensor
    reg_set dst=sbuf[35698:59]+0xf026692927a835f8:fp8_e4m3[] in0=sbuf[25:20322]+0x63a4b:int32[[-624666987,4294966309],[31,3043817028]] in1=hbm[17:11556]+0xa548c:bf16[[207272909,283866057]] extra=none[84:124]+0xa26d4:fp32[[-5,2139095040],[2143289344,1497831362],[-1151261356,2065267598]] op0=not_equal imm0=-493 op1=pow imm1=344740362 rd=r207 ra=r98 rb=r176 imm_i0=751224738 imm_i1=-1146368579 queue=14 flags=acc|negate|imm|s0_ap|s1_ap wait=s154>=2703154375 signal=s210

.engine vector
    max8 extra=none[15244:10794]+0x8000000000000000+r20:uint16[] op0=abs_max imm0=2.79197265e-34 op1=logical_xor imm1=3.92895879e+19 func=erf_dx rd=r203 ra=r108 rb=r1 imm_i0=1075838976 imm_i1=1754579270 queue=8 flags=acc|rev1|double_row signal=s11

.engine scalar
    dma_copy in0=none[89:45]+0x7526+r55:uint32[] in1=none[13:29416]+0xa08277d22e1d7241:fp8_e5m2[] in2=sbuf[5421:110:4775959170934504811]+0x1482b5f6def453e3:uint16[[629079948,610991121],[-1467252857,2147483649],[-5,3848085126],[-920,122]] extra=sbuf[31:54447:3801981257950499727]+0xc03038c0ecf36d56:bf16[[-385,873],[-4194304,4294966901],[-920,0]] op0=is_lt imm0=1.00893489e-43 op1=logical_or imm1=-9.68931957e-08 func=relu rd=r132 ra=r182 rb=r27 imm_i0=-1018864515 imm_i1=-133528517 queue=2 flags=reduce|s0_ap|s1_ap wait=s105>=1510265138 signal=s49

.engine gpsimd
    dma_copy dst=none[35447:108]+0x26c67b61101e7bb1+r73:fp8_e4m3[[-831,1200669608],[419,3003854928],[-339631429,2143289344]] in0=psum[27855:102]+0x2c23a7e837edf06+r61:fp16[[-105,4294967081],[-891,2029024480],[660453476,3625489781]] extra=hbm[84:49]+0xe92de+r178:fp32[] op0=bitwise_xor imm0=-8.53212187e-34 op1=is_ge imm1=4.38606419e-43 func=sin rd=r15 ra=r196 rb=r144 imm_i0=365304735 imm_i1=881 queue=10 flags=rev0|rev1|negate|reduce|imm|s0_ap signal=s202
