.machine 10i2ab1
.semaphores 3451215809
.tensor aoB- scratch uint32 [665993572,59,4720,4712] @0x1f355ee35ff9e658

.engine tensor
    nop in0=hbm[50814:21]+0x49474:uint16[[505,3256865133],[-994,8388607]] extra=none[117:62479:3716889658251775893]+0xf33d553fe1847624:fp8_e4m3_neuron[[-1649683743,1346179329],[71,2339278314],[-2044270988,3864932930],[-4194304,1051372203]] wait=s127>=4286578687

.engine vector
    branch dst=psum[106:35:-9223372036854775808]+0xa390e:tf32[[89931232,2853444592],[916130294,4294966484]] in0=psum[38:10]+0x64411e97d8f16fd7:uint8[] in1=none[102:41]+0x45ed3:fp8_e4m3_neuron[[-738995669,4294966345]] extra=hbm[86:114]+0x76ec7:int16[] op0=le imm0=488179999 op1=mult imm1=2139095040 rd=r160 ra=r134 rb=r198 imm_i0=896 imm_i1=-832 queue=13 flags=rev0|rev1|negate|reduce|imm|s0_ap wait=s25>=2143289345 signal=s69

.engine gpsimd
    partition_reduce dst=psum[13880:55050:-1]+0x87b96+r175:fp8_e4m3_neuron[[1152834006,0],[1436337896,2097124001]] op0=pow imm0=0xfffffd2e op1=is_equal imm1=0xffffff89 func=sqrt rd=r4 ra=r46 rb=r50 imm_i0=-826 imm_i1=1006276591 queue=13 flags=acc|rev1|negate|reduce|double_row|imm|s0_ap|s1_ap wait=s235>=383 signal=s125
