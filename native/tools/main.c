/* main.c - the `k3` command-line tool: benchmarks and debugging on top of the engine.
 * cli_usage() is the single source of truth for its commands and options; nothing else
 * lists them. Subcommands live in tools/cmd_*.c and are dispatched from the table below. */
#include "commands.h"
#include "k3.h"
#include "run_memory.h"

#include <stdio.h>
#include <string.h>

void cli_usage(FILE *f) {
    fprintf(f,
            "k3 %s, the Kimi K3 inference engine\n"
            "\n"
            "usage: k3 MODEL_DIR (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [options]\n"
            "       k3 COMMAND [options]\n"
            "       k3 --list-presets | --help | --version\n"
            "\n"
            "running the model (MODEL_DIR holds config.json, the safetensors and tiktoken.model):\n"
            "  --ids 1,2,3         prompt token ids (the reproducible channel the tests use)\n"
            "  --prompt TEXT       prompt text, tokenized with the model's tokenizer (special-token\n"
            "                      names become their ids); the generated text is printed too\n"
            "  --prompt-file PATH  the same from a file; use it for non-ASCII text\n"
            "  --tok DIR           tokenizer directory (default: MODEL_DIR)\n"
            "  --gen N             tokens to generate greedily (default 8)\n"
            "  --incremental       prefill once, then one token per step, carrying the KDA state\n"
            "                      and the MLA cache; without it every step recomputes the whole\n"
            "                      sequence (the reference path; same tokens, O(T^2))\n"
            "  --spec N            speculative decoding (implies --incremental): draft up to N\n"
            "                      tokens (1..16) by n-gram lookup and verify them with the pending\n"
            "                      token in one batched pass; output is identical to serial decode.\n"
            "                      Drafts are only as long as measured costs say they pay.\n"
            "                      Prints the totals, then each verify pass's drafted/accepted\n"
            "                      counts in order ('spec rounds (drafted/accepted): 6/2 3/3')\n"
            "  --heal              token healing (with --prompt or --prompt-file; implies --incremental):\n"
            "                      the prompt is cut at the start of its last piece (the K3 split\n"
            "                      pattern's) and the first generated tokens must spell the cut\n"
            "                      bytes, so a prompt ending inside a token is completed as the\n"
            "                      model would write it; the printed text includes them\n"
            "  --spec-always       with --spec: draft whenever the drafter proposes, paying or not\n"
            "                      (for testing the drafter and the verifier)\n"
            "  --replay-acceptance A  with --spec (benchmarks): each drafted token is offered while a\n"
            "                      seeded coin lands with probability A (0..1), the first that does\n"
            "                      not is spoiled; with the serial continuation as --context-ids the\n"
            "                      drafts land as a drafter accepting A of its tokens would. Same output\n"
            "  --context-ids 1,2,3 / --context-file PATH\n"
            "                      extra drafting material for --spec (ids, or text to tokenize):\n"
            "                      e.g. the rest of the file after the cursor, neighbouring files\n"
            "  --save-state PATH   after the run, save the sequence and its carried state (with\n"
            "                      --gen 0: prefill the prompt and save it)\n"
            "  --load-state PATH   resume a saved sequence; the prompt is its continuation and only\n"
            "                      the prompt is prefilled (implies --incremental)\n"
            "  --threads N         worker threads (default 1); any N gives the same bits\n"
            "  --batch N           tokens per forward pass during prefill; 0 (the default): sized by the\n"
            "                      memory plan, 128 where no weights stream, up to 4096 where they do\n"
            "  --tf-check          teacher-forced check: one pass over the prompt, report how often\n"
            "                      the greedy prediction after each position is the next id\n"
            "  --dump-logits PATH  raw float32 logits of the first generated step; with\n"
            "                      --tf-check, of every position (positions x vocab)\n"
            "  --dump-activations DIR\n"
            "                      every layer's values, one file per site named after the reference's\n"
            "                      modules (model.embed_tokens, model.layers.L.input_layernorm input,\n"
            "                      .self_attn output, .post_attention_layernorm input, .mlp or\n"
            "                      .block_sparse_moe output, .block_sparse_moe.gate chosen experts\n"
            "                      (int32), model.norm, lm_head), float32 rows at their sequence\n"
            "                      positions, indexed by DIR/activations.json; with --tf-check every\n"
            "                      position has logits. docs/ACTIVATIONS.md compares a dump with the\n"
            "                      Hugging Face reference\n"
            "  --out FILE          write JSON: prompt_ids, generated_ids, full_ids,\n"
            "                      seconds_per_token, peak_rss_bytes, and memory (the budgets,\n"
            "                      the plan, and the expert-cache and trunk counters of the run)\n"
            "\n"
            "memory (where the weights live; every setting gives bit-identical output):\n"
            "  --preset NAME       laptop | desktop | workstation | server | max | auto | mapped: named\n"
            "                      trunk and expert-cache budgets; auto sizes both from MemAvailable,\n"
            "                      trunk first, keeping 1 GiB + 5%% spare, and refuses below the floor;\n"
            "                      mapped maps both (the default)\n"
            "  --trunk-gb X        own the trunk in X GB: pin as many layers as fit, stream the rest\n"
            "                      through a ring of layer slots read just ahead of use; 'map' (the\n"
            "                      default) maps it from the shards\n"
            "  --cache-gb X        read routed experts into an LRU cache of X GB; 'map' (the default)\n"
            "                      maps them all. --preset, --trunk-gb and --cache-gb apply in order\n"
            "  --list-presets      print the presets (budgets, peak RSS at full scale, this engine's\n"
            "                      plan, the forecast seconds per token on this machine when a machine\n"
            "                      profile exists) and what auto picks here; also `k3 --list-presets`\n"

            "  --io-threads N      expert reader threads (default 2)\n"
            "  --reads MODE        how routed experts and ring layers are read every pass: 'direct'\n"
            "                      around the page cache (O_DIRECT, far less CPU; where the file\n"
            "                      system allows), 'buffered' through it, 'auto' (the default) direct\n"
            "                      when what streams exceeds what MemAvailable leaves beside the model\n"
            "  --expert-prefetch on|off\n"
            "                      with an expert cache: guess the next MoE layer's experts by\n"
            "                      applying its router early to the current residual mix, and read\n"
            "                      them into cold slots once this layer's reads are under way; the\n"
            "                      output is the same bits either way (default off)\n"
            "  --cold              drop the shards from the page cache first (posix_fadvise\n"
            "                      DONTNEED), for cold-cache benchmarks\n"
            "  --fault-expert-read N\n"
            "                      testing: the N-th expert read fails as if the shard ended there\n"
            "  Before loading, the plan (trunk, embed + lm_head, expert cache, vectors, index,\n"
            "  recurrent state, KV cache, buffers) is printed to stderr; after the run, the measured\n"
            "  peak RSS, the I/O share of wall-clock time and the cache counters. K3_MEM_AVAILABLE=\n"
            "  BYTES in the environment stands in for MemAvailable (to plan for a smaller machine).\n"
            "\n"
            "tokenizer (DIR holds tiktoken.model and tokenizer_config.json, e.g. MODEL_DIR):\n"
            "  k3 tokenize --tok DIR (--prompt TEXT | --prompt-file PATH) [--no-special]\n"
            "                      print the ids of the text as a JSON array (last line); the\n"
            "                      names of special tokens become their ids unless --no-special\n"
            "  k3 detokenize --tok DIR --ids 1,2,3\n"
            "                      write the text of the ids, byte for byte\n"
            "\n"
            "drafting:\n"
            "  k3 draft-replay --tok DIR --prefix-file PATH --truth-file PATH\n"
            "                  [--context-file PATH] [--spec N]\n"
            "                      replay the true continuation (truth) after the prefix as if a\n"
            "                      perfect model wrote it, and count what --spec N would draft and\n"
            "                      accept from the sequence and the context file: the drafter's\n"
            "                      upper bound on real text (no model is loaded)\n"
            "\n"
            "serving (the OpenAI-compatible HTTP API, for k3-code's remote backend and other tools):\n"
            "  k3 serve MODEL_DIR [--port N] [--host ADDR] [options]\n"
            "                      one model, one request on the engine at a time, greedy decoding,\n"
            "                      stop ids [EOS] and <|end_of_msg|>. Routes: GET /health,\n"
            "                      GET /v1/models, POST /v1/completions (prompt: text, whose special-\n"
            "                      token names become their ids, or token ids; stop strings; extra\n"
            "                      field k3_checkpoints: prompt positions to checkpoint; k3_heal:\n"
            "                      true heals a text prompt as --heal does, or a string is the\n"
            "                      text the client cut off the prompt's end; the answer leaves\n"
            "                      out the healed bytes), POST\n"
            "                      /v1/chat/completions (K3 chat format; chat_template_kwargs.thinking,\n"
            "                      default true; reasoning_effort low|medium|high|max, default max;\n"
            "                      the think channel comes back as reasoning_content); \"stream\": true\n"
            "                      streams server-sent events (stream_options: include_usage, and\n"
            "                      continuous_usage_stats for the usage in every chunk);\n"
            "                      \"return_token_ids\": true adds\n"
            "                      prompt_token_ids and token_ids to an answer that is not streamed.\n"
            "                      temperature must be 0 or absent. A client that half-closes its side\n"
            "                      counts as gone. A\n"
            "                      prompt sharing a prefix with an earlier one prefills only the rest\n"
            "                      (usage.prompt_tokens_details.cached_tokens says how much was reused).\n"
            "                      A client that disconnects cancels its request. Memory options as above.\n"
            "  --port N            TCP port (default 8080; 0: any free port). The first line on stdout\n"
            "                      is 'k3 serve: listening on http://HOST:PORT ...'\n"
            "  --host ADDR         numeric IPv4/IPv6 address or localhost (default 127.0.0.1)\n"
            "  --allow-non-loopback  required to listen on an address other than loopback; without\n"
            "                      K3_API_KEY it starts with a warning that anyone can use the model\n"
            "  --model-name NAME   the model id in /v1/models and requests (default: MODEL_DIR's name)\n"
            "  --ctx N             positions of the one context (default 8192); longer prompts get 400\n"
            "  --queue N           requests that may wait for the engine (default 16); past it 429\n"
            "  --max-connections N open connections (default 128); past it the connection that has\n"
            "                      been reading its request longest is answered 408 to make room,\n"
            "                      and only when none is reading does a newcomer get 503\n"
            "  --max-body BYTES    largest request body (default 16 MiB); past it 413\n"
            "  --spec N            draft up to N tokens per forward pass (0..16, default 8; same text)\n"
            "  --checkpoint-mb N   memory for prefix checkpoints, least recently used dropped first\n"
            "                      (default 256); GET /health reports what they hold\n"
            "  --threads N / --batch N / --tok DIR   as for running the model\n"
            "  K3_API_KEY=KEY in the environment: /v1/* requires 'Authorization: Bearer KEY' (the\n"
            "                      scheme in any case); set but empty, serve refuses to start.\n"
            "  SIGINT or SIGTERM stops it: the running request is cancelled, waiting ones get 503.\n"
            "\n"
            "benchmark:\n"
            "  k3 bench MODEL_DIR [--threads N] [--prompt-tokens N] [--gen N] [--out FILE]\n"
            "                      this machine's f32 multiply-add peak with the engine's\n"
            "                      kernels, prefill speed (after one warm-up prefill) and\n"
            "                      its FLOP/s as a share of that peak, then 8 rounds of a\n"
            "                      memory-bandwidth triad\n"
            "                      each followed by an eighth of the decode: decode speed,\n"
            "                      weight bytes per decoded token and achieved / bandwidth-\n"
            "                      bound decode speed (median round); peak RSS and how much\n"
            "                      of the mapped weights the kernel maps in 2 MB pages (decode\n"
            "                      reads 4 kB pages slower); per layer kind (dense,\n"
            "                      kda+moe, mla+moe, lm_head) its share of prefill's and\n"
            "                      decode's time, prefill's FLOP/s over the peak and decode's\n"
            "                      weight bytes over its time over the triad; --out writes\n"
            "                      JSON with every round and kind (defaults: 1 thread, 128\n"
            "                      prompt tokens, 32 generated; --gen at least 8)\n"
            "  k3 bench-scale MODEL_DIR --out FILE [memory options] [--threads N] [--prompt-tokens N]\n"
            "                 [--steps N] [--rounds N] [--repeat] [--cold-each-token] [--prefill N [--prefill-batch N]]\n"
            "                 [--verify 1,2,4,8] [--verify-reps N] [--disk 1,0,256] [--disk-gb X]\n"
            "                 [--disk-random N] [--disk-mixed GB] [--disk-twice] [--disk-extents FILE]\n"
            "                 [--disk-after] [--beside-reads]\n"
            "                      where a forward pass's time goes, layer by layer (mixer, FFN, waits\n"
            "                      for trunk and expert reads, weight bytes streamed), next to limits\n"
            "                      measured in the same process; every figure raw to FILE (JSON), for\n"
            "                      scripts/bench/scale.ts. --steps one-token passes (default 8) after\n"
            "                      a prompt of --prompt-tokens (default 8); --rounds N: a memory-\n"
            "                      bandwidth triad before each of N stretches of steps; --repeat: every\n"
            "                      step decodes the same token at the same position (restored from a\n"
            "                      checkpoint), so a cache that holds one token's experts makes it\n"
            "                      resident; --cold-each-token: drop the shards from the page cache\n"
            "                      before every pass (a pool far larger than memory); --prefill N: a\n"
            "                      timed prefill of N tokens first, in passes of the batch the plan\n"
            "                      allows (--prefill-batch N to give one); --verify: passes of that many\n"
            "                      positions (1..512) from one point, --verify-reps times each\n"
            "                      (default 3); a pass longer than 128 sets the batch to its length.\n"
            "                      Before loading: --disk MB,...: the disk's cold sequential read of\n"
            "                      --disk-gb (default 1) at each block size (0: the model's expert\n"
            "                      size), each over its own stretch of the shards; --disk-random N: N\n"
            "                      cold expert-sized reads at random offsets on --io-threads readers,\n"
            "                      none of the same bytes twice (at most the pool);\n"
            "                      --disk-mixed GB: also both at once (GB sequential at the largest\n"
            "                      --disk block), as a pass that streams its trunk while its\n"
            "                      experts are read; --disk-twice: each probe twice, the second kept\n"
            "                      (a virtual disk's host serves bytes it has just served from its\n"
            "                      own cache, as it does the bytes a pass reads again every pass);\n"
            "                      --disk-extents FILE: the probes read the bytes it lists (lines\n"
            "                      'SHARD OFFSET LENGTH t|e': t the sequential stream, e the units a\n"
            "                      random read takes whole) instead of whole shards; --disk-after: the\n"
            "                      probes again after the steps. The probes read\n"
            "                      as the engine does under --reads: around the page cache with\n"
            "                      'direct', through it otherwise. After the steps,\n"
            "                      --beside-reads (with --rounds and --disk-random): the triad alone and\n"
            "                      while the random probe's reads run beside it, and with --repeat\n"
            "                      the steps again beside such reads\n"
            "  k3 bench-kernels [--threads N] [--tokens N] [--rounds N] [--out FILE]\n"
            "                      the matrix kernels on K3's released shapes from memory: 16 routed\n"
            "                      experts in MXFP4 (281 MB) and three 7168 x 7168 bf16 projections\n"
            "                      (308 MB), --tokens (default 1) a product, with every kernel\n"
            "                      implementation this CPU runs, each of --rounds (default 5) after a\n"
            "                      memory-bandwidth triad: GB/s and share of the triad, median round\n"
            "  k3 forecast [MODEL_DIR] [--profile FILE] [--positions N] [--expert-hit-rate H] [--batch N]\n"
            "              [--json] [memory options]\n"
            "                      seconds per forward pass forecast for the full-scale release (or\n"
            "                      MODEL_DIR) under every preset, or under the given budgets, on the\n"
            "                      machine the profile describes (default: $K3_MACHINE_PROFILE, else\n"
            "                      ~/.cache/k3/machine-profile.json, written by `npm run bench -- scale`):\n"
            "                      the compute at the measured memory bandwidth and per-layer efficiency,\n"
            "                      the streamed trunk and missed experts at the measured disk speed, and\n"
            "                      what bounds it (the model: native/src/forecast.h). --positions N: a\n"
            "                      pass verifying N positions. --expert-hit-rate H: the share of expert\n"
            "                      requests the cache serves (0..1) instead of what an LRU keeps with\n"
            "                      routing spread evenly, to check the forecast against a measured run.\n"
            "                      Beside it, time to first token: the prefill of a 512- and a 2,048-token\n"
            "                      prompt in passes of the batch the plan allows on this machine, or of\n"
            "                      --batch N (0: the plan's)\n"
            "\n"
            "Errors print a detail naming the file, tensor, field and numbers, and exit 1;\n"
            "bad command lines exit 2; a plan that does not fit this machine, or a budget below\n"
            "its floor, is refused before loading and exits 3.\n",
            k3_version());
}

/* Subcommands: `k3 NAME ...` runs fn with argv starting at NAME. */
static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"tokenize", tokenize_main},
    {"detokenize", detokenize_main},
    {"bench", bench_main},
    {"bench-scale", scale_main},
    {"bench-kernels", bench_kernels_main},
    {"forecast", forecast_main},
    {"draft-replay", draft_replay_main},
    {"serve", serve_main},
    {NULL, NULL},
};

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] != '-') {
        for (int c = 0; commands[c].name; c++)
            if (!strcmp(argv[1], commands[c].name))
                return commands[c].fn(argc - 1, argv + 1);
        return run_main(argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cli_usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("k3 %s\n", k3_version());
            return 0;
        }
        if (!strcmp(argv[i], "--list-presets")) {
            run_memory_list_presets(stdout, NULL);
            return 0;
        }
        fprintf(stderr, "k3: unknown option or command '%s'\n\n", argv[i]);
        cli_usage(stderr);
        return 2;
    }
    cli_usage(stderr);
    return 2;
}
