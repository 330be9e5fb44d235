.semaphores 35

.engine tensor
    barrier extra=sbuf[30934:1201]+0x86c88+r25:int32[] op0=abs_min imm0=-8388608 op1=average imm1=487 func=sqrt rd=r224 ra=r125 rb=r164 imm_i0=1142415123 imm_i1=742521279 queue=1 flags=rev1|s0_ap|s1_ap signal=s8

.engine sync
    sem_signal dst=hbm[40:68]+0x33a04+r46:int8[] in0=sbuf[112:27]+0x9f533384994f5e9+r110:uint16[[614,530],[-1,838039878]] in2=psum[64705:42399]+0x74beb79364325cc5:int8[[1266679809,1868913920],[-824201410,1494868045],[218163540,555],[619,962]] op0=max imm0=2006825357 op1=is_equal imm1=197 func=silu rd=r137 ra=r105 rb=r37 imm_i0=501612802 imm_i1=1086868608 queue=3 flags=acc|rev0|rev1|negate|reduce|double_row|s1_ap wait=s155>=4148627582 signal=s177
