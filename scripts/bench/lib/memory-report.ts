// memory-report.ts - the shape of the "memory" member the CLI writes into its --out JSON
// (`k3 MODEL_DIR --out FILE`, `k3 bench-scale --out FILE`): the budgets, the plan and the
// expert-cache and trunk counters of the run. native/tools/run_memory.c (run_memory_json)
// writes it; this is the one declaration every reader (tests, benchmarks) uses.

/** The plan the engine made before opening the model (k3.h's k3_plan), bytes unless named. */
export interface MemoryPlan {
  trunk: number;
  embed_lm_head: number;
  vectors: number;
  index: number;
  expert_cache: number;
  recurrent_state: number;
  kv_cache: number;
  buffers: number;
  total: number;
  available: number;
  layers: number;
  layers_pinned: number;
  ring_slots: number;
  ring_slot_bytes: number;
  dense_weights: number;
  expert_slots: number;
  expert_slot_bytes: number;
  expert_pool: number;
  experts: number;
  /** 1 when the trunk is mapped from the shards, 0 when the engine owns it. */
  trunk_mapped: number;
  /** 1 when the routed experts are mapped, 0 when they go through the expert cache. */
  experts_mapped: number;
  trunk_floor: number;
  cache_floor: number;
  /** Tokens per prefill pass, whether the plan sized it to memory (1) or was given it (0),
   * and the buffer bytes each token of a batch adds. */
  batch: number;
  batch_sized: number;
  batch_token_bytes: number;
}

/** The run's memory report: counters are the timed part's (after load), seconds wall-clock
 * or summed over reader threads as k3.h's k3_memory_counters says. */
export interface MemoryReport {
  /** The --preset given last ("" when only budgets were). */
  preset: string;
  trunk_budget_bytes: number;
  expert_cache_budget_bytes: number;
  plan: MemoryPlan;
  wall_seconds: number;
  peak_rss_bytes: number;
  expert_requests: number;
  expert_retained: number;
  expert_evictions: number;
  expert_reads: number;
  expert_bytes_read: number;
  expert_read_seconds: number;
  expert_wait_seconds: number;
  trunk_layer_reads: number;
  trunk_bytes_read: number;
  trunk_read_seconds: number;
  trunk_wait_seconds: number;
  trunk_pinned_bytes: number;
  trunk_pinned_seconds: number;
  direct_bytes_read: number;
  forward_passes: number;
  forward_seconds: number;
  /** 1 when --expert-prefetch on: the next MoE layer's experts guessed and read early. */
  expert_prefetch: number;
  /** Experts guessed; of those, routed to by that layer (the guess's hit rate). */
  expert_guesses: number;
  expert_guesses_routed: number;
  /** Reads started from a guess and their bytes (also in expert_reads, expert_bytes_read). */
  expert_early_reads: number;
  expert_early_bytes: number;
  /** Early reads a pass then used; reader seconds of those (an upper bound on the wait saved). */
  expert_early_used: number;
  expert_early_used_seconds: number;
}
