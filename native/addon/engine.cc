// engine.cc - Model and Context for Node: open a checkpoint, decode tokens, read logits.
// Synchronous and thin: each method is one k3.h call plus argument checks. The language
// server's asynchronous calls (session.cc) use the same Model.
#include <string>

#include "addon.h"

namespace {

class Model : public Napi::ObjectWrap<Model> {
  public:
    static Napi::FunctionReference constructor;

    static void Register(Napi::Env env, Napi::Object exports) {
        Napi::Function ctor = DefineClass(env, "Model",
                                          {
                                              InstanceMethod("close", &Model::Close),
                                              InstanceMethod("check", &Model::Check),
                                              InstanceAccessor("vocabSize", &Model::VocabSize, nullptr),
                                              InstanceAccessor("hiddenSize", &Model::HiddenSize, nullptr),
                                              InstanceAccessor("layerCount", &Model::LayerCount, nullptr),
                                          });
        constructor = Napi::Persistent(ctor);
        exports.Set("Model", ctor);
    }

    // new Model(dir). (session.cc's openModel() wraps a model opened on a worker thread
    // by passing it as an External, which JS code cannot make.)
    explicit Model(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Model>(info) {
        Napi::Env env = info.Env();
        if (info.Length() == 1 && info[0].IsExternal()) {
            model_ = info[0].As<Napi::External<k3_model>>().Data();
            return;
        }
        if (info.Length() < 1 || !info[0].IsString()) {
            Napi::TypeError::New(env, "Model(dir): dir must be a string").ThrowAsJavaScriptException();
            return;
        }
        std::string dir = info[0].As<Napi::String>();
        char detail[2048] = "";
        k3_status s = OpenModelHandle(dir.c_str(), nullptr, &model_, detail, sizeof detail);
        if (s != K3_OK)
            ThrowK3Error(env, s, detail);
    }

    ~Model() override { k3_model_close(model_); }

    k3_model *Handle(Napi::Env env) {
        if (!model_)
            Napi::Error::New(env, "the model is closed").ThrowAsJavaScriptException();
        return model_;
    }

  private:
    Napi::Value Close(const Napi::CallbackInfo &info) {
        k3_model_close(model_);
        model_ = nullptr;
        return info.Env().Undefined();
    }
    // check(): undefined while the model is still the one loaded, else the Error the next
    // pass would throw (code "io", naming the shard that changed); k3_model_check.
    Napi::Value Check(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        k3_model *m = Handle(env);
        if (!m)
            return env.Undefined();
        char detail[2048] = "";
        const k3_status s = k3_model_check(m, detail, sizeof detail);
        return s == K3_OK ? env.Undefined() : MakeK3Error(env, s, detail).Value();
    }
    Napi::Value VocabSize(const Napi::CallbackInfo &info) {
        k3_model *m = Handle(info.Env());
        return m ? Napi::Number::New(info.Env(), k3_model_vocab_size(m)) : info.Env().Undefined();
    }
    Napi::Value HiddenSize(const Napi::CallbackInfo &info) {
        k3_model *m = Handle(info.Env());
        return m ? Napi::Number::New(info.Env(), k3_model_hidden_size(m)) : info.Env().Undefined();
    }
    Napi::Value LayerCount(const Napi::CallbackInfo &info) {
        k3_model *m = Handle(info.Env());
        return m ? Napi::Number::New(info.Env(), k3_model_layer_count(m)) : info.Env().Undefined();
    }

    k3_model *model_ = nullptr;
};

Napi::FunctionReference Model::constructor;

int OptionalInt(Napi::Object opts, const char *key, int fallback) {
    Napi::Value v = opts.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}

class Context : public Napi::ObjectWrap<Context> {
  public:
    static void Register(Napi::Env env, Napi::Object exports) {
        Napi::Function ctor = DefineClass(env, "Context",
                                          {
                                              InstanceMethod("decode", &Context::Decode),
                                              InstanceMethod("sync", &Context::Sync),
                                              InstanceMethod("checkpoint", &Context::Checkpoint),
                                              InstanceMethod("reset", &Context::Reset),
                                              InstanceMethod("close", &Context::Close),
                                              InstanceAccessor("length", &Context::Length, nullptr),
                                              InstanceAccessor("tokens", &Context::Tokens, nullptr),
                                          });
        exports.Set("Context", ctor);
    }

    // new Context(model, { maxContext?, threads?, batch? })
    explicit Context(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Context>(info) {
        Napi::Env env = info.Env();
        if (info.Length() < 1 || !info[0].IsObject() || !info[0].As<Napi::Object>().InstanceOf(Model::constructor.Value())) {
            Napi::TypeError::New(env, "Context(model, options): model must be a Model").ThrowAsJavaScriptException();
            return;
        }
        Model *model = Model::Unwrap(info[0].As<Napi::Object>());
        k3_model *m = model->Handle(env);
        if (!m)
            return;
        modelRef_ = Napi::Persistent(info[0].As<Napi::Object>()); // the model outlives its contexts
        k3_context_params p;
        k3_context_params_default(&p);
        if (info.Length() > 1 && info[1].IsObject()) {
            Napi::Object o = info[1].As<Napi::Object>();
            p.max_context = OptionalInt(o, "maxContext", p.max_context);
            p.n_threads = OptionalInt(o, "threads", p.n_threads);
            p.batch = OptionalInt(o, "batch", p.batch);
        }
        vocab_ = k3_model_vocab_size(m);
        char detail[2048] = "";
        k3_status s = k3_context_open(m, &p, &ctx_, detail, sizeof detail);
        if (s != K3_OK)
            ThrowK3Error(env, s, detail);
    }

    ~Context() override { k3_context_close(ctx_); }

  private:
    bool Open(Napi::Env env) {
        if (!ctx_)
            Napi::Error::New(env, "the context is closed").ThrowAsJavaScriptException();
        return ctx_ != nullptr;
    }

    // decode(ids: Int32Array, nLogits = 0, argmax = false) -> { logits: Float32Array, argmax?: Int32Array }
    Napi::Value Decode(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Open(env))
            return env.Undefined();
        if (info.Length() < 1 || !info[0].IsTypedArray() ||
            info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
            Napi::TypeError::New(env, "decode(ids, nLogits, argmax): ids must be an Int32Array").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        Napi::Int32Array ids = info[0].As<Napi::Int32Array>();
        const int n = static_cast<int>(ids.ElementLength());
        const int nLogits = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0;
        const bool wantArgmax = info.Length() > 2 && info[2].ToBoolean().Value();
        if (nLogits < 0 || nLogits > n) {
            Napi::RangeError::New(env, "decode: nLogits must be between 0 and ids.length").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        Napi::Float32Array logits = Napi::Float32Array::New(env, static_cast<size_t>(nLogits) * vocab_);
        Napi::Int32Array argmax = Napi::Int32Array::New(env, wantArgmax ? n : 0);
        k3_status s = k3_decode(ctx_, ids.Data(), n, nLogits ? logits.Data() : nullptr, nLogits,
                                wantArgmax ? argmax.Data() : nullptr);
        if (s != K3_OK) {
            ThrowK3Error(env, s, k3_context_error(ctx_));
            return env.Undefined();
        }
        Napi::Object result = Napi::Object::New(env);
        result.Set("logits", logits);
        if (wantArgmax)
            result.Set("argmax", argmax);
        return result;
    }

    // sync(ids: Int32Array) -> number of tokens resumed rather than recomputed
    Napi::Value Sync(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Open(env))
            return env.Undefined();
        if (info.Length() < 1 || !info[0].IsTypedArray() ||
            info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
            Napi::TypeError::New(env, "sync(ids): ids must be an Int32Array").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        Napi::Int32Array ids = info[0].As<Napi::Int32Array>();
        int reused = 0;
        k3_status s = k3_sync(ctx_, ids.Data(), static_cast<int>(ids.ElementLength()), &reused);
        if (s != K3_OK) {
            ThrowK3Error(env, s, k3_context_error(ctx_));
            return env.Undefined();
        }
        return Napi::Number::New(env, reused);
    }

    // checkpoint(): remember the state at the current length
    Napi::Value Checkpoint(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Open(env))
            return env.Undefined();
        k3_status s = k3_checkpoint(ctx_);
        if (s != K3_OK)
            ThrowK3Error(env, s, k3_context_error(ctx_));
        return env.Undefined();
    }

    Napi::Value Reset(const Napi::CallbackInfo &info) {
        if (Open(info.Env()))
            k3_context_reset(ctx_);
        return info.Env().Undefined();
    }

    Napi::Value Close(const Napi::CallbackInfo &info) {
        k3_context_close(ctx_);
        ctx_ = nullptr;
        modelRef_.Reset();
        return info.Env().Undefined();
    }

    Napi::Value Length(const Napi::CallbackInfo &info) {
        return Open(info.Env()) ? Napi::Number::New(info.Env(), k3_context_length(ctx_)) : info.Env().Undefined();
    }

    Napi::Value Tokens(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Open(env))
            return env.Undefined();
        const int n = k3_context_length(ctx_);
        Napi::Int32Array out = Napi::Int32Array::New(env, n);
        const int32_t *src = k3_context_tokens(ctx_);
        for (int i = 0; i < n; i++)
            out[i] = src[i];
        return out;
    }

    k3_context *ctx_ = nullptr;
    int vocab_ = 0;
    Napi::ObjectReference modelRef_;
};

} // namespace

Napi::Error MakeK3Error(Napi::Env env, k3_status status, const char *detail) {
    Napi::Error e = Napi::Error::New(env, detail && *detail ? detail : k3_status_name(status));
    e.Set("code", Napi::String::New(env, k3_status_name(status)));
    e.Set("status", Napi::Number::New(env, status));
    return e;
}

void ThrowK3Error(Napi::Env env, k3_status status, const char *detail) {
    MakeK3Error(env, status, detail).ThrowAsJavaScriptException();
}

k3_status OpenModelHandle(const char *dir, const k3_model_params *params, k3_model **out, char *detail,
                          size_t detail_size) {
    return k3_model_open(dir, params, out, detail, detail_size);
}

Napi::Value WrapModel(Napi::Env env, k3_model *model) {
    return Model::constructor.New({Napi::External<k3_model>::New(env, model)});
}

k3_model *ModelHandle(Napi::Env env, Napi::Object object) {
    if (!object.InstanceOf(Model::constructor.Value()))
        return nullptr;
    return Model::Unwrap(object)->Handle(env);
}

void RegisterEngine(Napi::Env env, Napi::Object exports) {
    Model::Register(env, exports);
    Context::Register(env, exports);
}
