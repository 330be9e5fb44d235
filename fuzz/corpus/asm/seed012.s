.machine pGJeo0q
.semaphores 32
.tensor a1o_UNHcpi2 scratch int32 [4414,2443,4934] @0x12f84e08b0a21231
.tensor bgyXFLx8kC scratch int16 [2133574989] @0xb9f89f0d34cc1c1c

.engine scalar
    tensor_copy dst=psum[50616:41:700433634376784209]+0xde56ad1153ee307a:uint16[[-14157341,3762269533],[296,3692483296]] in2=none[44167:76]+0xd7ee0:int8[[-810991393,4294966456],[-8388609,2200664785],[-1643826851,2147483649],[1161083259,1051372203]] op0=abs_max imm0=3.29305139e-43 op1=logical_or imm1=16777218.0 func=silu rd=r13 ra=r227 rb=r247 imm_i0=1075838976 imm_i1=2139095040 queue=5 flags=rev0|negate|reduce|double_row|s0_ap wait=s151>=4192759270
