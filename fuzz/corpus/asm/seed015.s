.semaphores 1036831949
.tensor a2i scratch fp32 [873,3542] @0x5c9563d63577efe4

.engine tensor
    nop dst=none[9276:88:31116]+0x99d0d:bf16[] in2=hbm[52791:20064]+0x8000000000000000:uint32[[1266679809,1549443495]] extra=none[48139:4:-6604418527583590554]+0x420333c6f3ddb735:int16[[1,975151183]] op0=average imm0=-75 op1=logical_xor imm1=-1104586131 func=sqrt rd=r183 ra=r26 rb=r14 imm_i0=194676913 imm_i1=2128917390 queue=12 flags=reduce|double_row|imm signal=s145

.engine vector
    reciprocal dst=psum[49597:4]+0x426bf+r133:uint8[] in0=sbuf[51563:104]+0x8000000000000000+r94:fp8_e4m3[[-9309377,4294966316],[483,49],[173451230,216],[2143289344,3156677646]] in2=none[20182:97]+0x927f09300f353a63+r170:uint16[[1904603346,1325749546],[1011530938,235],[788,286927256]] extra=psum[25973:35:-5894422319118603619]+0:uint8[[-396,1036831949],[190,915],[1266679809,2755512076],[-819860979,3427374110]] op0=mult imm0=3.40282347e+38 op1=is_ge imm1=9.8511282e-43 func=square rd=r241 ra=r234 rb=r68 imm_i0=431 imm_i1=2110351121 flags=rev1|double_row

.engine scalar
    halt in1=sbuf[124:46539:-9223372036854775808]+0x3f3af:fp8_e4m3_neuron[] extra=none[42:8:420840]+0xa0fb7+r69:int16[[1056040656,2025660010]] op0=rsqrt imm0=-4194304 op1=not_equal imm1=33 func=silu rd=r195 ra=r44 rb=r117 imm_i0=-1952330897 imm_i1=-116 queue=12 flags=acc|rev0|reduce|double_row|imm signal=s234

.engine sync
    sem_signal in0=psum[7:60]+0xffffffffffffffff+r166:int32[] in1=hbm[44307:56:-9223372036854775808]+0x8f83c03a7d24c0b8:fp16[[-1036089345,2851195384]] extra=hbm[46651:35509:298327]+0x35b0301a908c64f6:uint16[[-4,1376941139],[-1937443489,1378378630],[811,475330252],[472643787,3227357318]] op0=bitwise_and imm0=-84028019 op1=subtract imm1=-377 func=abs rd=r238 ra=r250 rb=r146 imm_i0=-1141688220 imm_i1=1504721461 queue=2 flags=acc|reduce|double_row wait=s48>=297 signal=s169
