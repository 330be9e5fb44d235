/* Machine state: geometry per generation from the machine files, NaN fill of fresh memory, lazily backed HBM,
 * host access bounds, configuration errors, and the core's rounding mode (stochastic rounding reproducible by
 * seed and unbiased). */
#include "check.h"
#include "sim/core_internal.h"
#include "sim/sim_test_util.h"

static tern_core *core_opts(const char *machine, const tern_core_options *o)
{
    tern_core_config cfg;
    tern_error err;
    tern_core *c = NULL;
    if (tern_core_config_load(machine, &cfg, &err) || tern_core_create(&cfg, o, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    return c;
}

static tern_instr copy_ins(tern_dtype dst_dt, unsigned dst_off, tern_dtype src_dt, unsigned src_off, unsigned n)
{
    tern_instr ins = st_instr(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR);
    ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, dst_dt, 0, 128, dst_off, n);
    ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, src_dt, 0, 128, src_off, n);
    return ins;
}

int main(void)
{
    tern_error err;
    TEST_BEGIN("geometry per generation comes from the machine files");
    {
        const char *names[3] = {"neuroncore-v2", "neuroncore-v3", "neuroncore-v4"};
        const uint64_t sbuf[3] = {180224, 212984, 245752};
        const int gen[3] = {2, 3, 4};
        for (int i = 0; i < 3; i++) {
            tern_core_config cfg;
            CHECK_EQ_INT(tern_core_config_load(names[i], &cfg, &err), TERN_OK);
            CHECK_EQ_INT(cfg.generation, gen[i]);
            CHECK_EQ_INT(cfg.partitions, 128);
            CHECK_EQ_INT(cfg.sbuf_partition_bytes, sbuf[i]);
            CHECK_EQ_INT(cfg.psum_banks * cfg.psum_bank_bytes, 16384);
            CHECK_EQ_INT(cfg.pe_rows, 128);
        }
        tern_core_config cfg;
        CHECK_EQ_INT(tern_core_config_load("trn2.48xlarge", &cfg, &err), TERN_OK);
        CHECK_EQ_INT(cfg.hbm_bytes, 96ull << 30);
        CHECK(tern_core_config_load("no-such-machine", &cfg, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "no-such-machine");
    }

    TEST_BEGIN("fresh memory reads as NaN with fill_nan");
    {
        tern_core_options o = {0};
        o.fill_nan = 1;
        tern_core *c = core_opts("neuroncore-v2", &o);
        tern_instr ins = copy_ins(TERN_DTYPE_FP32, 0, TERN_DTYPE_BF16, 4096, 16);
        CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
        float got[128 * 16];
        st_read(c, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, got, 16);
        int nans = 0;
        for (int i = 0; i < 128 * 16; i++)
            nans += isnan(got[i]);
        CHECK_EQ_INT(nans, 128 * 16);
        float h;
        CHECK_EQ_INT(tern_core_hbm_read(c, 1ull << 33, &h, 4, &err), TERN_OK);
        CHECK(isnan(h));
        tern_core_free(c);
        TEST_BEGIN("fresh memory reads as zero without fill_nan");
        c = core_opts("neuroncore-v2", NULL);
        CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
        st_read(c, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, got, 16);
        CHECK_NEAR(got[5], 0.0, 0);
        tern_core_free(c);
    }

    TEST_BEGIN("HBM is backed lazily: the last bytes of 32 GiB are usable");
    {
        tern_core *c = core_opts("trn1.2xlarge", NULL);
        uint64_t end = 32ull << 30;
        uint32_t v = 0xDEADBEEF, back = 0;
        CHECK_EQ_INT(tern_core_hbm_write(c, end - 4, &v, 4, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_hbm_read(c, end - 4, &back, 4, &err), TERN_OK);
        CHECK_EQ_HEX(back, 0xDEADBEEF);
        CHECK(tern_core_hbm_write(c, end - 2, &v, 4, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "outside HBM of 34359738368 bytes");
        /* a page-crossing access */
        uint8_t buf[64];
        memset(buf, 7, sizeof buf);
        CHECK_EQ_INT(tern_core_hbm_write(c, (1u << 20) - 32, buf, sizeof buf, &err), TERN_OK);
        memset(buf, 0, sizeof buf);
        CHECK_EQ_INT(tern_core_hbm_read(c, (1u << 20) - 32, buf, sizeof buf, &err), TERN_OK);
        CHECK(buf[0] == 7 && buf[63] == 7);
        TEST_BEGIN("on-chip host access is bounds-checked");
        CHECK(tern_core_onchip_write(c, TERN_MEM_SBUF, 128, 0, buf, 4, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "partition 128 outside 128 partitions");
        CHECK(tern_core_onchip_write(c, TERN_MEM_PSUM, 0, 16380, buf, 8, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "outside the 16384 bytes of a partition");
        CHECK(tern_core_onchip_read(c, TERN_MEM_HBM, 0, 0, buf, 8, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "memory hbm is not SBUF or PSUM");
        tern_core_free(c);
    }

    TEST_BEGIN("partitions lie a padded pitch apart on the host; instructions and host access agree on it");
    {
        /* The host layout: whole cache lines, more than the partition, an odd number of lines past a multiple of
         * 4 KiB (successive rows start in different L1 sets), at least 1 KiB past it (spread over L2's sets). */
        tern_core *c = st_core("neuroncore-v2");
        size_t pitches[2] = {c->sbuf_pitch, c->psum_pitch};
        uint64_t bytes[2] = {c->cfg.sbuf_partition_bytes, (uint64_t)c->cfg.psum_banks * c->cfg.psum_bank_bytes};
        for (int m = 0; m < 2; m++) {
            CHECK(pitches[m] % 64 == 0 && pitches[m] >= bytes[m] + 1024);
            CHECK((pitches[m] % 4096 / 64) % 2 == 1);
        }
        /* The last 64 bytes of every SBUF partition and the first 64 of PSUM's, distinct per partition: copied
         * through an instruction both ways, read back through the host interface. */
        float src[128 * 16], got[128 * 16];
        for (int i = 0; i < 128 * 16; i++)
            src[i] = (float)(i * 3 + 1);
        uint64_t last = c->cfg.sbuf_partition_bytes - 64, plast = bytes[1] - 64;
        st_write(c, TERN_MEM_SBUF, 0, 128, last, TERN_DTYPE_FP32, src, 16);
        tern_instr ins = st_instr(TERN_OP_TENSOR_COPY, TERN_ENGINE_VECTOR);
        ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, plast, 16);
        ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, last, 16);
        CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
        st_read(c, TERN_MEM_PSUM, 0, 128, plast, TERN_DTYPE_FP32, got, 16);
        CHECK(memcmp(src, got, sizeof src) == 0);
        ins.ap[TERN_AP_DST] = st_ap1(TERN_MEM_SBUF, TERN_DTYPE_FP32, 0, 128, 0, 16);
        ins.ap[TERN_AP_IN0] = st_ap1(TERN_MEM_PSUM, TERN_DTYPE_FP32, 0, 128, plast, 16);
        CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
        st_read(c, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, got, 16);
        CHECK(memcmp(src, got, sizeof src) == 0);
        /* one partition's last bytes and the next one's first are different bytes */
        uint8_t a[4] = {1, 2, 3, 4}, b[4] = {9, 9, 9, 9}, r[4];
        CHECK_EQ_INT(tern_core_onchip_write(c, TERN_MEM_SBUF, 5, c->cfg.sbuf_partition_bytes - 4, a, 4, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_onchip_write(c, TERN_MEM_SBUF, 6, 0, b, 4, &err), TERN_OK);
        CHECK_EQ_INT(tern_core_onchip_read(c, TERN_MEM_SBUF, 5, c->cfg.sbuf_partition_bytes - 4, r, 4, &err), TERN_OK);
        CHECK(memcmp(a, r, 4) == 0);
        tern_core_free(c);
    }

    TEST_BEGIN("invalid core geometry is rejected");
    {
        tern_core_config cfg;
        tern_core_config_load("neuroncore-v2", &cfg, &err);
        cfg.partitions = 0;
        tern_core *c = NULL;
        CHECK(tern_core_create(&cfg, NULL, &c, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "partitions 0 outside [1, 1024]");
        CHECK(c == NULL);
        tern_core_config_load("neuroncore-v2", &cfg, &err);
        cfg.num_semaphores = 300;
        CHECK(tern_core_create(&cfg, NULL, &c, &err) != TERN_OK);
        CHECK_STR_CONTAINS(err.msg, "300 semaphores");
    }

    TEST_BEGIN("stochastic rounding on write: reproducible, seed-dependent, unbiased");
    {
        const unsigned N = 512;
        float *x = malloc(sizeof(float) * 128 * N);
        const float v = 1.0f + 0x1p-10f; /* 1/8 of the way from 1 to the next bf16 (1 + 2^-7) */
        for (unsigned i = 0; i < 128 * N; i++)
            x[i] = v;
        uint16_t *out[3];
        const uint64_t seeds[3] = {7, 7, 8};
        for (int r = 0; r < 3; r++) {
            tern_core_options o = {0};
            o.rounding = TERN_ROUND_STOCHASTIC;
            o.seed = seeds[r];
            tern_core *c = core_opts("neuroncore-v2", &o);
            st_write(c, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, x, N);
            tern_instr ins = copy_ins(TERN_DTYPE_BF16, 8192, TERN_DTYPE_FP32, 0, N);
            CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
            out[r] = malloc(2 * 128 * N);
            for (unsigned p = 0; p < 128; p++)
                tern_core_onchip_read(c, TERN_MEM_SBUF, p, 8192, out[r] + p * N, 2 * N, &err);
            tern_core_free(c);
        }
        CHECK(memcmp(out[0], out[1], 2 * 128 * N) == 0);
        CHECK(memcmp(out[0], out[2], 2 * 128 * N) != 0);
        double sum = 0;
        unsigned ups = 0, strays = 0;
        for (unsigned i = 0; i < 128 * N; i++) {
            float f = tern_bf16_to_f32(out[0][i]);
            strays += !(f == 1.0f || f == 1.0f + 0x1p-7f);
            sum += f;
            ups += f != 1.0f;
        }
        CHECK_MSG(strays == 0, "%u elements rounded to something other than a neighbour of %g", strays, (double)v);
        double n = 128.0 * N, p = 0.125, mean = sum / n;
        double sigma = 0x1p-7 * sqrt(p * (1 - p) / n);
        CHECK_MSG(fabs(mean - v) <= 3 * sigma, "mean %.9g vs %.9g (3 sigma %.3g), %u of %.0f up", mean, (double)v,
                  3 * sigma, ups, n);
        for (int r = 0; r < 3; r++)
            free(out[r]);
        TEST_BEGIN("round-to-nearest-even by default");
        tern_core *c = core_opts("neuroncore-v2", NULL);
        st_write(c, TERN_MEM_SBUF, 0, 128, 0, TERN_DTYPE_FP32, x, N);
        tern_instr ins = copy_ins(TERN_DTYPE_BF16, 8192, TERN_DTYPE_FP32, 0, N);
        CHECK_EQ_INT(st_run(c, &ins, &err), TERN_OK);
        uint16_t b[4];
        tern_core_onchip_read(c, TERN_MEM_SBUF, 77, 8192 + 100, b, 8, &err);
        CHECK_EQ_HEX(b[0], 0x3F80);
        CHECK_EQ_HEX(b[3], 0x3F80);
        tern_core_free(c);
        free(x);
    }
    return check_report();
}
