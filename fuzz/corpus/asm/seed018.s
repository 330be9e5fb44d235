.machine RF572
.semaphores 32
.tensor a6CMqZX25nkA9FLZRH3_ output fp16 [2326,88,1788] @0x7c57f3c7b473113a
.tensor b.SFJytOTq input fp16 [4265,3756] @0xa76b8
.tensor cXO input fp16 [290450291,2849,3326] @0xb6218e523613a8aa

.engine sync
    sem_wait dst=hbm[63262:63030:730345]+0xc664+r195:uint8[] in1=psum[29601:16358]+0xa30c275f65dbed82:fp32[[810,8388607],[0,3902988750]] in2=psum[89:41584:1694224062987249128]+0xff6ee77d645d1747:tf32[[-2027095637,2927145955],[1895937682,3489269313],[2112176700,1],[1,2528060125]] op0=mult imm0=8388607 op1=is_gt imm1=1075838976 func=erf rd=r66 ra=r154 rb=r8 imm_i0=450 imm_i1=236 queue=12 flags=double_row|imm|s0_ap signal=s236
