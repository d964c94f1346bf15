// addon.h - what the addon's source files share: their registration functions and the
// one way an engine failure becomes a JS exception. Internal to native/addon/.
#ifndef K3_ADDON_H
#define K3_ADDON_H

#include <napi.h>

#include "k3.h"

// A JS Error whose message is the engine's detail, with `code` (the status name, e.g.
// "tensor") and `status` (its number) set, so callers can branch on them.
Napi::Error MakeK3Error(Napi::Env env, k3_status status, const char *detail);

// Throws MakeK3Error(...).
void ThrowK3Error(Napi::Env env, k3_status status, const char *detail);

// Adds Model and Context (native/addon/engine.cc) to the exports.
void RegisterEngine(Napi::Env env, Napi::Object exports);

// The one place the addon opens a checkpoint (any thread; engine.cc). params NULL: mapped.
k3_status OpenModelHandle(const char *dir, const k3_model_params *params, k3_model **out, char *detail,
                          size_t detail_size);

// A JS Model owning an already opened model (JS thread; engine.cc).
Napi::Value WrapModel(Napi::Env env, k3_model *model);

// The open model behind a JS Model; nullptr (with an exception pending when it is closed)
// when `object` is not an open Model.
k3_model *ModelHandle(Napi::Env env, Napi::Object object);

// Adds openModel() and Session (native/addon/session.cc) to the exports.
void RegisterSession(Napi::Env env, Napi::Object exports);

// The open tokenizer behind a JS Tokenizer, held for a job on another thread (which may
// only read its tables: k3.h): close() waits until every holder has released it. nullptr
// (with an exception pending) when `object` is not an open Tokenizer. JS thread only.
k3_tokenizer *TokenizerHold(Napi::Env env, Napi::Object object);
void TokenizerRelease(Napi::Object object);

#endif
