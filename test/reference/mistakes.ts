// mistakes.ts - the classic K3 porting mistakes, each named so the reference can compute
// what a port that makes it would produce. The engine's tests use them to show that every
// mistake is visible at the tolerance they hold the engine to. Only the names and their
// meaning live here; each module implements the mistakes of its own math.

export const MISTAKES = [
  'mla-lora-norm-eps-1e-5',
  'mla-scale-nope-only',
  'expert-w1-w3-swapped',
  'router-bias-in-weights',
  'router-bias-ignored',
  'latent-norm-before-experts',
  'latent-norm-after-up-proj',
  'attn-res-sum-normalised',
  'kda-no-qk-l2norm',
  'kda-wrong-gate-form',
  'kda-a-log-per-channel',
  'kda-state-transposed',
  'kda-beta-outside-sigmoid',
  'situ-sigmoid-of-capped-gate',
  'router-not-renormalised',
  'zero-based-layer-lists',
] as const;

export type Mistake = (typeof MISTAKES)[number];

/** What each mistake does, as the wrong port would write it. */
export const MISTAKE_DESCRIPTIONS: Record<Mistake, string> = {
  'mla-lora-norm-eps-1e-5': 'MLA q_a_layernorm/kv_a_layernorm use rms_norm_eps (1e-5) instead of the default 1e-6',
  'mla-scale-nope-only': 'MLA softmax scale 1/sqrt(qk_nope_head_dim) instead of 1/sqrt(qk_nope_head_dim + qk_rope_head_dim)',
  'expert-w1-w3-swapped': 'routed experts use w3 as the gate and w1 as the up projection',
  'router-bias-in-weights': 'the routing weights are the bias-corrected scores instead of the plain sigmoid scores',
  'router-bias-ignored': 'the experts are selected by the plain sigmoid scores, without e_score_correction_bias',
  'latent-norm-before-experts': 'routed_expert_norm is applied to the latent input of the experts instead of their weighted sum',
  'latent-norm-after-up-proj': 'the latent RMSNorm is applied after routed_expert_up_proj (full width, unit gamma) instead of before it',
  'attn-res-sum-normalised': 'the attention-residual mix sums the normalised candidates instead of the raw ones',
  'kda-no-qk-l2norm': 'KDA q and k are not L2-normalised (q keeps its head_dim^-1/2 scale)',
  'kda-wrong-gate-form': 'KDA uses the other decay gate form (softplus when gate_lower_bound is set, lower-bound -5 when it is not)',
  'kda-a-log-per-channel': 'KDA reads A_log per key channel (A_log[d], shared by all heads) instead of per head',
  'kda-state-transposed': 'the KDA state is held as [value][key], so the per-key-channel decay lands on value channels',
  'kda-beta-outside-sigmoid': 'KDA beta is the raw b_proj logit, with no sigmoid',
  'situ-sigmoid-of-capped-gate': 'SiTU takes the sigmoid of the capped gate b1*tanh(g/b1) instead of the uncapped g',
  'router-not-renormalised': 'the top-k routing weights are the plain sigmoid scores, not divided by their sum (moe_renormalize ignored)',
  'zero-based-layer-lists': 'kda_layers/full_attn_layers read as 0-based: layer i is KDA iff i is listed, otherwise MLA',
};

export interface ReferenceOptions {
  /** Compute what a port making this mistake would (the default is the correct model). */
  mistake?: Mistake;
  /**
   * Shown every site's values, named as the engine's --dump-activations names them
   * (model.embed_tokens, model.layers.L.input_layernorm input, .self_attn output,
   * .post_attention_layernorm input, .mlp / .block_sparse_moe output, model.norm output):
   * one row per position. At model.layers.L.block_sparse_moe.gate the rows are the chosen
   * experts (ascending) and `gaps` the margin between the k-th and the next biased score,
   * so a caller can tell a real routing difference from a near-tie.
   */
  trace?: (name: string, rows: readonly ArrayLike<number>[], gaps?: readonly number[]) => void;
}
