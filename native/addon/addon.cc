// addon.cc - the Node binding of the K3 engine: a thin node-addon-api layer that
// converts between JS values and the C API of include/k3.h, and nothing more.
#include <napi.h>

#include <algorithm>
#include <cstdint>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string>
#include <vector>

#include "addon.h"
#include "k3.h"

namespace {

Napi::Value Version(const Napi::CallbackInfo &info) {
    return Napi::String::New(info.Env(), k3_version());
}

// ---- Tokenizer ----------------------------------------------------------------------
// `new Tokenizer(dir)` wraps a k3_tokenizer; `new TokenStream(tokenizer)` wraps a
// k3_detokenize_stream over it. Engine failures throw through ThrowK3Error (addon.h):
// `code` is the status name and the message the engine's detail. Tokenizing runs
// on the calling (JS) thread: prompts are small and it is fast (see
// scripts/bench/tokenizer.ts).

// Marks objects made by the Tokenizer constructor, so TokenStream can trust what it is given.
constexpr napi_type_tag kTokenizerTag = {0x6b33746f6b656e69ULL, 0x7a65722d76310001ULL};

// True and *out set when v is a number holding a 32-bit integer.
bool ReadInt32(const Napi::Value &v, int32_t *out) {
    if (!v.IsNumber())
        return false;
    double d = v.As<Napi::Number>().DoubleValue();
    if (!(d >= INT32_MIN && d <= INT32_MAX) || d != static_cast<double>(static_cast<int32_t>(d)))
        return false;
    *out = static_cast<int32_t>(d);
    return true;
}

// Reads an Int32Array or an array of integer numbers into ids; throws a TypeError otherwise.
bool ReadTokenIds(Napi::Env env, const Napi::Value &v, std::vector<int32_t> &ids) {
    if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
        Napi::Int32Array a = v.As<Napi::Int32Array>();
        ids.assign(a.Data(), a.Data() + a.ElementLength());
        return true;
    }
    if (v.IsArray()) {
        Napi::Array a = v.As<Napi::Array>();
        ids.resize(a.Length());
        for (uint32_t i = 0; i < a.Length(); i++) {
            if (!ReadInt32(a.Get(i), &ids[i])) {
                Napi::TypeError::New(env, "ids[" + std::to_string(i) + "] is not a 32-bit integer")
                    .ThrowAsJavaScriptException();
                return false;
            }
        }
        return true;
    }
    Napi::TypeError::New(env, "ids must be an Int32Array or an array of integers")
        .ThrowAsJavaScriptException();
    return false;
}

class Tokenizer : public Napi::ObjectWrap<Tokenizer> {
  public:
    static Napi::FunctionReference constructor;

    static Napi::Function Define(Napi::Env env) {
        Napi::Function ctor = DefineClass(env, "Tokenizer",
                           {
                               InstanceMethod<&Tokenizer::Encode>("encode"),
                               InstanceMethod<&Tokenizer::Decode>("decode"),
                               InstanceMethod<&Tokenizer::DecodeBytes>("decodeBytes"),
                               InstanceMethod<&Tokenizer::SpecialId>("specialId"),
                               InstanceMethod<&Tokenizer::TokenBytes>("tokenBytes"),
                               InstanceMethod<&Tokenizer::LastPiece>("lastPiece"),
                               InstanceMethod<&Tokenizer::Close>("close"),
                               InstanceAccessor<&Tokenizer::VocabSize>("vocabSize"),
                           });
        constructor = Napi::Persistent(ctor);
        return ctor;
    }

    explicit Tokenizer(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Tokenizer>(info) {
        Napi::Env env = info.Env();
        if (info.Length() == 1 && info[0].IsExternal()) { // from openTokenizer(), below
            tok_ = info[0].As<Napi::External<k3_tokenizer>>().Data();
            info.This().As<Napi::Object>().TypeTag(&kTokenizerTag);
            return;
        }
        if (!info[0].IsString()) {
            Napi::TypeError::New(env, "new Tokenizer(dir): dir must be a string").ThrowAsJavaScriptException();
            return;
        }
        std::string dir = info[0].As<Napi::String>().Utf8Value();
        char detail[1024];
        k3_status st = k3_tokenizer_open(dir.c_str(), &tok_, detail, sizeof detail);
        if (st != K3_OK) {
            ThrowK3Error(env, st, detail);
            return;
        }
        info.This().As<Napi::Object>().TypeTag(&kTokenizerTag);
    }

    ~Tokenizer() override { k3_tokenizer_close(tok_); }

    // The open tokenizer, or nullptr after throwing when close() has freed it.
    k3_tokenizer *Get(Napi::Env env) {
        if (!tok_ || closing_)
            ThrowK3Error(env, K3_ERR_INVALID_ARGUMENT, "the tokenizer is closed");
        return closing_ ? nullptr : tok_;
    }

    // A job on a worker thread reads the tokenizer until Release(); close() meanwhile only
    // marks it, and the last Release() frees it.
    k3_tokenizer *Hold(Napi::Env env) {
        k3_tokenizer *tok = Get(env);
        if (tok)
            holders_++;
        return tok;
    }

    void Release() {
        if (--holders_ == 0 && closing_) {
            k3_tokenizer_close(tok_);
            tok_ = nullptr;
        }
    }

  private:
    // encode(text: string | Uint8Array, allowSpecial = true): Int32Array
    Napi::Value Encode(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = Get(env);
        if (!tok)
            return env.Undefined();
        std::string owned;
        const char *text;
        size_t len;
        if (info[0].IsString()) {
            owned = info[0].As<Napi::String>().Utf8Value();
            text = owned.data();
            len = owned.size();
        } else if (info[0].IsTypedArray() &&
                   info[0].As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
            Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
            text = reinterpret_cast<const char *>(bytes.Data());
            len = bytes.ByteLength();
        } else {
            Napi::TypeError::New(env, "encode(text): text must be a string or a Uint8Array")
                .ThrowAsJavaScriptException();
            return env.Undefined();
        }
        bool allow_special = info[1].IsUndefined() ? true : info[1].ToBoolean().Value();
        std::vector<int32_t> ids(len + 1);
        size_t n = 0;
        k3_status st = k3_tokenize(tok, text, len, allow_special ? 1 : 0, ids.data(), ids.size(), &n);
        if (st != K3_OK) {
            ThrowK3Error(env, st, k3_tokenizer_error(tok));
            return env.Undefined();
        }
        Napi::Int32Array out = Napi::Int32Array::New(env, n);
        std::copy(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), out.Data());
        return out;
    }

    // The bytes of ids in bytes; false after throwing.
    bool DecodeTo(const Napi::CallbackInfo &info, std::string &bytes) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = Get(env);
        std::vector<int32_t> ids;
        if (!tok || !ReadTokenIds(env, info[0], ids))
            return false;
        size_t n = 0;
        k3_status st = k3_detokenize(tok, ids.data(), ids.size(), nullptr, 0, &n);
        if (st == K3_OK) {
            bytes.resize(n);
            st = k3_detokenize(tok, ids.data(), ids.size(), bytes.data(), n, &n);
        }
        if (st != K3_OK) {
            ThrowK3Error(env, st, k3_tokenizer_error(tok));
            return false;
        }
        return true;
    }

    // decode(ids): string (bytes that are not UTF-8 become U+FFFD)
    Napi::Value Decode(const Napi::CallbackInfo &info) {
        std::string bytes;
        if (!DecodeTo(info, bytes))
            return info.Env().Undefined();
        return Napi::String::New(info.Env(), bytes);
    }

    // decodeBytes(ids): Uint8Array, exactly the bytes
    Napi::Value DecodeBytes(const Napi::CallbackInfo &info) {
        std::string bytes;
        if (!DecodeTo(info, bytes))
            return info.Env().Undefined();
        Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), bytes.size());
        std::copy(bytes.begin(), bytes.end(), out.Data());
        return out;
    }

    // specialId(name): number, -1 when no special slot has that name
    Napi::Value SpecialId(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = Get(env);
        if (!tok)
            return env.Undefined();
        if (!info[0].IsString()) {
            Napi::TypeError::New(env, "specialId(name): name must be a string").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        std::string name = info[0].As<Napi::String>().Utf8Value();
        int32_t id = name.find('\0') == std::string::npos ? k3_tokenizer_special_id(tok, name.c_str()) : -1;
        return Napi::Number::New(env, id);
    }

    // tokenBytes(id): Uint8Array, the bytes of one token
    Napi::Value TokenBytes(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = Get(env);
        if (!tok)
            return env.Undefined();
        int32_t id = -1;
        size_t len = 0;
        const char *b = ReadInt32(info[0], &id) ? k3_tokenizer_token(tok, id, &len) : nullptr;
        if (!b) {
            std::string detail = "id " + info[0].ToString().Utf8Value() + " is outside the vocabulary (0.." +
                                 std::to_string(k3_tokenizer_vocab_size(tok) - 1) + ")";
            ThrowK3Error(env, K3_ERR_TOKEN, detail.c_str());
            return env.Undefined();
        }
        Napi::Uint8Array out = Napi::Uint8Array::New(env, len);
        std::copy(b, b + len, out.Data());
        return out;
    }

    // lastPiece(text: string): number, the UTF-16 offset where the text's last piece (of the
    // K3 split pattern) starts: where token healing backs a prompt off to.
    Napi::Value LastPiece(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = Get(env);
        if (!tok)
            return env.Undefined();
        if (!info[0].IsString()) {
            Napi::TypeError::New(env, "lastPiece(text): text must be a string").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        const std::string text = info[0].As<Napi::String>().Utf8Value();
        size_t start = 0;
        const k3_status st = k3_tokenizer_last_piece(tok, text.data(), text.size(), &start);
        if (st != K3_OK) {
            ThrowK3Error(env, st, k3_tokenizer_error(tok));
            return env.Undefined();
        }
        // Bytes to UTF-16 units: pieces start on characters, and a 4-byte one is a pair.
        size_t units = 0;
        for (size_t i = 0; i < start; i++) {
            const unsigned char b = static_cast<unsigned char>(text[i]);
            if ((b & 0xC0) != 0x80)
                units += b >= 0xF0 ? 2 : 1;
        }
        return Napi::Number::New(env, static_cast<double>(units));
    }

    // close(): frees the engine tokenizer (once no job holds it); later calls throw.
    Napi::Value Close(const Napi::CallbackInfo &info) {
        closing_ = true;
        if (holders_ == 0) {
            k3_tokenizer_close(tok_);
            tok_ = nullptr;
        }
        return info.Env().Undefined();
    }

    Napi::Value VocabSize(const Napi::CallbackInfo &info) {
        k3_tokenizer *tok = Get(info.Env());
        if (!tok)
            return info.Env().Undefined();
        return Napi::Number::New(info.Env(), k3_tokenizer_vocab_size(tok));
    }

    k3_tokenizer *tok_ = nullptr;
    int holders_ = 0;
    bool closing_ = false;
};

Napi::FunctionReference Tokenizer::constructor;

// openTokenizer(dir) -> Promise<Tokenizer>: the same as new Tokenizer(dir), read on a
// worker thread (parsing tiktoken.model takes a few hundred milliseconds).
class TokenizerOpenJob : public Napi::AsyncWorker {
  public:
    TokenizerOpenJob(Napi::Env env, std::string dir)
        : Napi::AsyncWorker(env, "k3-tokenizer-open"), dir_(std::move(dir)), deferred_(Napi::Promise::Deferred::New(env)) {}

    Napi::Promise Promise() { return deferred_.Promise(); }

  protected:
    void Execute() override { status_ = k3_tokenizer_open(dir_.c_str(), &tok_, detail_, sizeof detail_); }

    void OnOK() override {
        Napi::Env env = Env();
        if (status_ != K3_OK) {
            deferred_.Reject(MakeK3Error(env, status_, detail_).Value());
            return;
        }
        deferred_.Resolve(Tokenizer::constructor.New({Napi::External<k3_tokenizer>::New(env, tok_)}));
    }

  private:
    std::string dir_;
    Napi::Promise::Deferred deferred_;
    k3_tokenizer *tok_ = nullptr;
    k3_status status_ = K3_OK;
    char detail_[1024] = "";
};

Napi::Value OpenTokenizer(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        Napi::TypeError::New(env, "openTokenizer(dir): dir must be a string").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    auto *job = new TokenizerOpenJob(env, info[0].As<Napi::String>().Utf8Value());
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
}

// new TokenStream(tokenizer): push(id) returns the text that is ready (never half a
// character), end() the rest. Keeps its tokenizer alive.
class TokenStream : public Napi::ObjectWrap<TokenStream> {
  public:
    static Napi::Function Define(Napi::Env env) {
        return DefineClass(env, "TokenStream",
                           {
                               InstanceMethod<&TokenStream::Push>("push"),
                               InstanceMethod<&TokenStream::End>("end"),
                           });
    }

    explicit TokenStream(const Napi::CallbackInfo &info) : Napi::ObjectWrap<TokenStream>(info) {
        if (!info[0].IsObject() || !info[0].As<Napi::Object>().CheckTypeTag(&kTokenizerTag)) {
            Napi::TypeError::New(info.Env(), "new TokenStream(tokenizer): not a Tokenizer")
                .ThrowAsJavaScriptException();
            return;
        }
        owner_ = Napi::Persistent(info[0].As<Napi::Object>());
        tokenizer_ = Tokenizer::Unwrap(info[0].As<Napi::Object>());
    }

  private:
    Napi::Value Push(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_tokenizer *tok = tokenizer_->Get(env);
        if (!tok)
            return env.Undefined();
        int32_t id;
        if (!ReadInt32(info[0], &id)) {
            Napi::TypeError::New(env, "push(id): id must be a 32-bit integer").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        char out[K3_TOKEN_MAX_BYTES + 3];
        size_t n = 0;
        k3_status st = k3_detokenize_stream_next(tok, &stream_, id, out, sizeof out, &n);
        if (st != K3_OK) {
            ThrowK3Error(env, st, k3_tokenizer_error(tok));
            return env.Undefined();
        }
        return Napi::String::New(env, out, n);
    }

    Napi::Value End(const Napi::CallbackInfo &info) {
        char out[4];
        size_t n = k3_detokenize_stream_end(&stream_, out);
        return Napi::String::New(info.Env(), out, n);
    }

    Napi::ObjectReference owner_;
    Tokenizer *tokenizer_ = nullptr;
    k3_detokenize_stream stream_ = {};
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    // The engine's threads and libuv's pool each get a malloc arena of their own by default
    // (up to 8 per core); what they free stays spread over those arenas and the resident set
    // creeps up under a day of completions. Two arenas, as k3 serve does: the soak benchmark
    // (npm run bench -- soak) ends 8 rounds at 157 MB instead of 182.
    mallopt(M_ARENA_MAX, 2);
#endif
    exports.Set("version", Napi::Function::New(env, Version, "version"));
    RegisterEngine(env, exports);
    RegisterSession(env, exports);
    exports.Set("Tokenizer", Tokenizer::Define(env));
    exports.Set("openTokenizer", Napi::Function::New(env, OpenTokenizer, "openTokenizer"));
    exports.Set("TokenStream", TokenStream::Define(env));
    return exports;
}

} // namespace

k3_tokenizer *TokenizerHold(Napi::Env env, Napi::Object object) {
    if (!object.CheckTypeTag(&kTokenizerTag)) {
        Napi::TypeError::New(env, "expected a Tokenizer").ThrowAsJavaScriptException();
        return nullptr;
    }
    return Tokenizer::Unwrap(object)->Hold(env);
}

void TokenizerRelease(Napi::Object object) {
    Tokenizer::Unwrap(object)->Release();
}

NODE_API_MODULE(k3, Init)
