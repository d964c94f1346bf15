/* serve_generate.h - the two generation routes of `k3 serve` (serve_generate.c):
 * POST /v1/completions and POST /v1/chat/completions, from the parsed body to the answer. */
#ifndef K3_SERVE_GENERATE_H
#define K3_SERVE_GENERATE_H

#include "json.h"
#include "serve.h"

/* Each reads the request (a refusal is answered 400), waits for the engine, runs the
 * prompt and answers, whole or streamed; the answer is always sent on return. */
void serve_handle_completions(conn *c, const json_value *root);
void serve_handle_chat(conn *c, const json_value *root);

#endif
