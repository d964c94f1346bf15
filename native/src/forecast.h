/* forecast.h - seconds per forward pass of a checkpoint under given budgets on a measured
 * machine (k3_forecast of k3.h): the machine profile's format and reader, and the model
 * that turns per-layer-kind figures into a forecast. It reads no weights and allocates none;
 * the profile is written by scripts/bench/scale.ts from `k3 bench-scale` runs.
 *
 * Profile (JSON, at most FORECAST_PROFILE_MAX_BYTES):
 *   {"format": "k3-machine-profile", "version": 3, "source": "...",
 *    "threads": 2, "io_threads": 2,
 *    "memory_bandwidth": B,        bytes/s, the triad on `threads` threads
 *    "memory_bandwidth_reading": R, bytes/s, the same triad while the disk serves
 *                                  expert-sized reads on io_threads readers beside it
 *                                  (B over the median ratio of side-by-side pairs)
 *    "disk_sequential": D,         bytes/s, cold sequential reads at the trunk's block sizes
 *    "disk_expert": X,             bytes/s, cold expert-sized reads on io_threads readers
 *    "disk_concurrency": F,        optional: a sequential reader and io_threads expert
 *                                  readers at once, the time their bytes would take read
 *                                  one kind after the other (at D and X measured the same
 *                                  minutes) over the time they took (0.1..10; below 1 the
 *                                  two kinds slow each other more than time-sharing says)
 *    "kinds": {"dense": K, "kda_moe": K, "mla_moe": K, "lm_head": K},
 *    "verify": [{"positions": n, "factor": g}, ...],
 *    "prefill_factor": [{"positions": n, "factor": g'}, ...],   (optional)
 *    "check": {"configurations": n, "within": k, "worst": w}}   (optional)
 * where each K is {"seconds": s, "ffn_seconds": f, "bytes": b}: one resident pass of one
 * token through a layer of that kind (KDA + dense MLP; KDA + MoE and MLA + MoE with their
 * top-k experts; the final mix, norm and lm_head), the part of it after the attention
 * output, and the weight bytes it streamed, all measured at the release's width; and g is
 * the time of a pass of n positions over a pass of one, for everything but the routed
 * experts (1 at n = 1); g' is the same for a prompt's pass of n tokens, solved from a
 * measured prefill pass through the prefill model below (a verify pass computes the lm_head
 * for every position and is cut into passes of 32 logit rows, so past 32 its g is several
 * passes', not one's); prefills follow g' where the profile has it. check is how this model did on the machine it describes: forecast
 * against measured on n configurations of the slice the profile was measured on, k of
 * them within 15 %, the largest |forecast / measured - 1| w; every forecast made from the
 * profile carries it, so what shows a forecast can say how far to trust it.
 *
 * The model, per layer l of the target (its trunk bytes t_l, its kind k):
 *   compute c_l = s_k / b_k x (t_l x g(n) + U_l(n) x expert bytes), the kind's seconds per
 *     byte applied to the target's bytes; U_l(n) distinct experts for n positions, from
 *     top_k of E spread evenly: E (1 - (1 - top_k / E)^n)
 *   a pass computes slower by m = B / R (at least 1) while the disk reads beside it: the
 *     reads take memory bandwidth and the readers' copies take CPU from the same machine
 *     (docs/SCALE.md: on this VM m measured 1.1-1.7 from one run to the next, and a cold
 *     pass computed 1.0-2.6x slower than the resident step beside it, about 1.4x in the
 *     median; layers with no read of their own beside them slowed as much as those with).
 *     Only while they last: with W the seconds the disk reads beside compute (the expert
 *     reads with one ring slot, everything read with two, as `disk` below), compute of
 *     resident cost C takes m C when m C <= W (a decode pass, whose reads outlast it) and
 *     C + W (1 - 1/m) otherwise (a prefill, whose reads take seconds of a minutes-long pass)
 *   expert reads e_l = U_l(n) (1 - h) x expert bytes / X, with h what an LRU cache keeps
 *     under evenly spread routing, the layers asking in turn (lru_hit_rate below): near
 *     the cache's share of the pool when it holds several passes' experts, nothing when it
 *     holds less than one pass's
 *   exposed e'_l = max(0, e_l - m' f_l): expert reads overlap the layer's own FFN, slowed by the
 *     pass's own slowdown m' (its slowed compute over C)
 *   streamed trunk S = sum of the unpinned layers' bytes, read at D
 *   C = slowed as above (sum c_l + lm_head: s / b x its bytes x g(n))
 *   one ring slot:       T = C + S / D + sum e'_l    (trunk reads never overlap)
 *   two slots or pinned: T = max(C + sum e'_l, disk) with disk = (S / D + sum e_l) / F
 *     where both kinds read (F = 1 without it): the trunk reader and the expert readers
 *     share the device at once, each byte taking its own kind's time, scaled by how much
 *     reading both at once measured slower or faster than that. (Around the page cache
 *     into huge pages one reader alone nearly fills this VM's disk, and F measured
 *     0.79-1.08; without it the slice's streamed trunk was forecast 5-23 % fast in four
 *     runs: docs/SCALE.md.)
 * A mapped trunk or mapped experts have no forecast: the page cache decides what stays.
 *
 * Prefill of N tokens (time to first token) in passes of the batch B the plan allows
 * (K3_BATCH_AUTO: sized to memory where weights stream), ceil(N / B) passes, each as above
 * with n the pass's tokens and two changes for a batch:
 *   the trunk is read once per pass, so S / D is paid ceil(N / B) times, not N times
 *   each routed expert is read once per pass for all its tokens: U_l(n) reads per layer,
 *     and computes its n top_k / E tokens on average: U_l(n) at its bytes' cost plus the
 *     n top_k - U_l(n) other (token, expert) pairs at the marginal cost of a position,
 *     (g(n) - 1) / (n - 1), the slope the verify factors measured (g past the last
 *     measured count follows the last measured step's slope)
 *   the lm_head computes one row, the prompt's last token's, in the last pass only
 *     (decode.c asks for no other logits), not g(n) rows' worth
 * so a prompt's time is about ceil(N / B) x (S / D + expert reads) overlapped as above with
 * compute that grows with N. */
#ifndef K3_FORECAST_H
#define K3_FORECAST_H

#include "error.h"
#include "k3.h"
#include "model.h"

#define FORECAST_PROFILE_MAX_BYTES (64 * 1024)
#define FORECAST_MAX_VERIFY 32

typedef struct forecast_kind {
    double seconds, ffn_seconds, bytes;
} forecast_kind;

typedef struct forecast_profile {
    char source[256];
    int threads, io_threads;
    double memory_bandwidth, memory_bandwidth_reading, disk_sequential, disk_expert;
    double disk_concurrency; /* 0: not measured (plain time-sharing) */
    forecast_kind dense, kda_moe, mla_moe, lm_head;
    int n_verify;
    int verify_positions[FORECAST_MAX_VERIFY]; /* ascending, the first is 1 */
    double verify_factor[FORECAST_MAX_VERIFY];
    int n_prefill_factor; /* 0: not measured (prefill follows verify) */
    int prefill_factor_positions[FORECAST_MAX_VERIFY];
    double prefill_factor_values[FORECAST_MAX_VERIFY];
    int check_configurations, check_within; /* 0, 0: no check recorded */
    double check_worst;
} forecast_profile;

/* Reads and checks a profile; errors name the file, the field and the value. */
k3_status forecast_profile_load(const char *path, forecast_profile *out, k3_error *err);

/* The forecast for `dims` (its config and plan inputs) under the budgets mp (owned trunk
 * and expert cache) and their plan, for a pass of `positions` positions; hit_rate is the
 * expert cache's share of requests served, or negative for lru_hit_rate's. */
/* The share of expert requests an LRU cache of `slots` serves when each pass asks, in
 * every MoE layer, for a share q of the layer's experts (evenly at random; `pool` experts
 * in all): 1 - (1 - q)^J for the longest window of J passes whose distinct experts,
 * pool (1 - (1 - q)^J), fit in the slots. */
double lru_hit_rate(double slots, double pool, double q);

k3_status forecast_make(const forecast_profile *p, const model *dims, const k3_model_params *mp, const k3_plan *plan,
                        int positions, double hit_rate, k3_forecast *out, k3_error *err);

/* The prefill of `tokens` tokens in passes of `batch` (>= 1; the plan's), as above. */
k3_status forecast_prefill(const forecast_profile *p, const model *dims, const k3_model_params *mp,
                           const k3_plan *plan, int tokens, int batch, double hit_rate, k3_prefill_forecast *out,
                           k3_error *err);

#endif
