.machine 6X
.semaphores 32

.engine tensor
    transpose_pe in2=none[26643:50628]+0xcbf1576c5d59f1c9:uint16[[-825,4294967034],[1535118371,1266679809]]

.engine vector
    select in0=none[86:5229]+0xfcce8e25ec30d0ab+r2:int8[[57845791,2786939154]] in2=sbuf[124:53257]+0x68e335a4538e2ec8:fp8_e5m2[[2064272934,2758748212]] op0=abs_min imm0=-0.00289111002 op1=abs_min imm1=-1.41690142e-26 func=relu rd=r83 ra=r86 rb=r20 imm_i0=1485707460 imm_i1=-569 queue=1 flags=acc|rev0|rev1|double_row|s0_ap|s1_ap wait=s229>=4294966396 signal=s60
