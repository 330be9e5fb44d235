.machine 63DpJrE-feRi-D8vv3jNBZzcbXkB9Ob0UN6s0aKV4+P+rQ5APEjF3rRt0yTcWIV
.semaphores 32
.tensor aOsAW scratch int8 [954,1742,48] @0xffffffffffffffff

.engine tensor
    transpose_pe dst=psum[114:39:3470386885494097932]+0:uint16[[-2147483647,8388607],[-2147483648,4294966548],[-104,4294966312]] in0=hbm[120:71]+0xe213b9bb967fc5cd:int16[[-30022606,3648503701],[727,159836164]] in2=psum[23077:55138]+0:uint16[] op0=abs imm0=-1.90744695e-33 op1=abs imm1=-1.0 func=softplus rd=r34 ra=r211 rb=r201 imm_i0=-259613690 imm_i1=2006626550 queue=8 flags=negate|reduce|s0_ap wait=s92>=2103558995 signal=s213

.engine sync
    barrier dst=psum[52:44944]+0x8a611+r17:uint16[[2143289345,503],[486,8388608]] in0=none[27308:46395:67696913451332960]+0xaba3c53553507f9:int32[[-1594660965,2346669014]] in1=sbuf[88:98:1044009]+0+r155:int16[[834059379,732],[201,505267150],[-503,4137657389]] in2=hbm[18835:12055:524775]+0x15c5428f9f0be492+r67:fp8_e4m3_neuron[[188,2139095040],[2139095039,4286578688],[-194,1075838976],[-110,1036831949]] extra=psum[92:22896]+0xb0935b9f94fb4c7c+r92:fp8_e4m3_neuron[[-633,4],[28,2657352845],[121,3646532274],[1220977019,336235661]] op0=bitwise_or imm0=-1823825596 op1=shift_right imm1=-1 func=silu_dx rd=r175 ra=r161 rb=r53 imm_i0=385 imm_i1=1036831949 queue=14 flags=acc|rev0|rev1|negate|double_row|s0_ap wait=s16>=8388607
