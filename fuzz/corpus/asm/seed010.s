.semaphores 32

.engine tensor
    reg_alu in0=psum[16916:41:528238]+0x560d:int16[] in2=psum[56:8147:59224]+0x2b73fb892a4208bc:fp8_e4m3[[-2147483648,2362440931]] extra=hbm[41990:39249:-6478763490497664886]+0x211c0360450b4e12:fp8_e4m3_neuron[[949,1]] op0=logical_or imm0=774301250 op1=min imm1=2139095039 func=silu rd=r189 ra=r97 rb=r17 imm_i0=-1403409504 imm_i1=-578 queue=14 flags=rev0|reduce|imm|s0_ap|s1_ap

.engine scalar
    tensor_scalar dst=psum[90:120:-3506365482048704393]+0x4721ee806b664cd6:bf16[[-1909900991,1226446472]] in2=hbm[125:70]+0x12f84e08b0a21231+r235:uint8[[1266679809,446]] extra=sbuf[9:20]+0:fp8_e5m2[[979,1075838976],[1051372203,245]] op0=is_equal imm0=-1.40129846e-45 op1=not_equal imm1=1.0 func=reciprocal rd=r209 ra=r253 rb=r224 imm_i0=559 imm_i1=44 queue=12 flags=rev0|rev1|imm|s1_ap

.engine sync
    barrier dst=none[25324:30860]+0x9f8fd:fp8_e4m3_neuron[[1065353216,4188104147],[1544307850,1785677870],[0,3299878574]] in1=sbuf[52:116]+0xffffffffffffffff:uint8[[355631450,911],[1564094205,0],[661525961,4294966366]] in2=psum[66:6824]+0xffffffffffffffff:fp32[] extra=hbm[109:45715]+0x78f25+r237:int32[[1584521135,182948463],[-812015574,1065353216]] wait=s199>=330
