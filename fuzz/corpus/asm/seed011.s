.machine 2kh
.semaphores 32

.engine scalar
    reg_set dst=psum[12856:17:2160191123579957449]+0x74e8d816eb1b5ed3:fp32[[-790,0],[904591855,3212836864]] in0=hbm[7571:97]+0xee5a787cfbfc8672+r68:fp16[[60,2263007340],[-504,8388608],[2139095041,3122951611],[-8,710]] op0=mod imm0=2139095041 op1=not_equal imm1=937508459 func=square rd=r179 ra=r62 rb=r125 imm_i0=-4194304 imm_i1=-838 queue=13 flags=rev0|imm|s1_ap
