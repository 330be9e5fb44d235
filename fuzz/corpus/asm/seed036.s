.machine AMJ
.semaphores 1266679809

.engine tensor
    transpose_pe dst=psum[36081:12839:393543]+0xffffffffffffffff:bf16[[-489,4253536698],[237,680196319],[916772339,1075838976]] in2=sbuf[52084:32:7187752998986551287]+0x18d3399f59a0238:uint32[[-4194304,4294966621],[640,3839301404]] op0=mod imm0=-1.37434828e-18 op1=is_ge imm1=-2.21243818e+20 func=silu_dx rd=r190 ra=r21 rb=r165 imm_i0=674299944 imm_i1=1835413570 queue=8 flags=rev1|negate|double_row signal=s27

.engine vector
    sem_signal in0=none[90:14356]+0:fp32[[-943,2139095041]] in1=sbuf[101:47259:6362303602283115181]+0:uint16[[-1,862706275]] in2=hbm[124:48003]+0x4bbf315698cb19aa:fp8_e4m3[[-1586951633,941252395],[2139095039,4294966749],[0,2147483648]] extra=sbuf[23593:41]+0xe26f0a219c65a6dc:fp16[[24,3864740655]] op0=shift_right imm0=1593480045 op1=subtract imm1=1822452724 func=abs rd=r57 ra=r132 rb=r52 imm_i0=-705 imm_i1=-1008359198 queue=5 flags=negate|reduce|double_row|s0_ap wait=s40>=2139095040 signal=s92
    bn_aggr in2=hbm[88:89]+0xf4d1d:uint8[] extra=sbuf[19:35471:433015]+0:bf16[[1266679809,643]] op0=shift_right imm0=-4.3999163e-13 op1=is_le imm1=1.75677549e-19 func=silu rd=r92 ra=r14 rb=r235 imm_i0=-4194304 imm_i1=-337217501 queue=9 flags=acc|rev1|negate|reduce|double_row wait=s169>=442
    sem_signal dst=hbm[3788:40]+0x54fc1:fp32[[-299992796,1903386923]] in2=sbuf[47:19]+0x2a9b36024e5edf36:bf16[] extra=sbuf[61:74:-1]+0xa5876b7fced115b3:uint8[] op0=is_ge imm0=-760099487 op1=max imm1=1242033427 func=tanh rd=r211 ra=r29 rb=r235 imm_i0=-2071936028 imm_i1=-409 queue=2 flags=negate|reduce|double_row|s1_ap wait=s198>=3212836864

.engine scalar
    sem_wait in1=hbm[16:93:902329]+0x992388b03c24222b:uint16[] in2=sbuf[10922:2:8096693202479204524]+0x8000000000000000:int16[[1570861449,3915634577],[-652,4294966663]] extra=hbm[65327:53164]+0x4a1a87ea9e6e82de+r100:uint32[[2143289345,4294966418],[-681,4294967295]] op0=pow imm0=-981032377 op1=mult imm1=659 func=sign rd=r217 ra=r253 rb=r98 imm_i0=955923911 imm_i1=-847 queue=6 flags=acc|rev0|rev1|negate|double_row signal=s26
