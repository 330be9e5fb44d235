.machine 3QolLiRlq58c4xKyadg
.semaphores 32

.engine scalar
    sem_signal dst=none[15919:24:2447832033088879090]+0xeae771f9bf2cf643+r72:fp32[[34124404,1],[868741700,8388608],[-751381744,0],[-394,1142004004]] in0=hbm[31218:40]+0xd57fd:int32[[1036831949,2075856994]] in1=hbm[27443:57909]+0xe24e2:fp8_e4m3_neuron[[-78,4294966319],[-1831774032,2034269414]] in2=sbuf[25678:9438]+0x8de81aa41b2bbbf7:int32[[-2099664564,558168095]] op0=subtract imm0=1036831949 op1=divide imm1=-763 func=log rd=r75 ra=r163 rb=r128 imm_i0=1361452029 imm_i1=-520 queue=10 flags=rev1|negate|reduce|imm wait=s223>=1015454868 signal=s60

.engine sync
    sem_signal in2=psum[114:118:2421569288266367909]+0x31bfe+r31:fp16[[350,264]] op0=shift_right imm0=-545 op1=logical_xor imm1=8388608 func=sign rd=r87 ra=r216 rb=r244 imm_i0=-680514753 imm_i1=1487954069 queue=5 flags=acc|reduce|imm|s0_ap
