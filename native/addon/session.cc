// session.cc - the asynchronous side of the addon: opening a model and running a
// context's long calls (k3_sync, k3_generate, k3_checkpoint, k3_state_save/load) on libuv
// worker threads, so the JS thread never waits for the engine. Generated tokens stream to
// JS through a thread-safe function; stop() and cancel() may be called from JS at any time.
// It adds no behaviour of its own beyond that plumbing: every result is the engine's.
//
// Threading contract kept here (k3.h): a Session runs at most one job at a time (a second
// call while busy throws), and only k3_cancel() touches the context from another thread.
// k3_cancel() is aimed at the engine call running at that moment, so a cancel never
// reaches a later job; one that lands between a job's start and the engine call's start is
// caught by cancelRequested_ (checked before the call, and by stop() for generation).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "addon.h"

namespace {

// Reads an Int32Array or an array of integers; false (after throwing a TypeError) otherwise.
bool ReadIds(Napi::Env env, Napi::Value v, const char *what, std::vector<int32_t> &out) {
    if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
        Napi::Int32Array a = v.As<Napi::Int32Array>();
        out.assign(a.Data(), a.Data() + a.ElementLength());
        return true;
    }
    if (v.IsArray()) {
        Napi::Array a = v.As<Napi::Array>();
        out.resize(a.Length());
        for (uint32_t i = 0; i < a.Length(); i++) {
            Napi::Value e = a.Get(i);
            if (!e.IsNumber()) {
                Napi::TypeError::New(env, std::string(what) + " must hold integers").ThrowAsJavaScriptException();
                return false;
            }
            out[i] = e.As<Napi::Number>().Int32Value();
        }
        return true;
    }
    Napi::TypeError::New(env, std::string(what) + " must be an Int32Array or an array of integers")
        .ThrowAsJavaScriptException();
    return false;
}

int IntOption(Napi::Object o, const char *key, int fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}

// ---- openModel(dir, { preset, onProgress }) -> { promise, cancel } ---------------------
// The preset picks the budgets through k3_preset_resolve (k3.h "memory: presets, plans,
// budgets"): a name from presets(), "auto" (sized for this machine), or "mapped"/absent
// (everything mapped from the shards). Progress (phase, bytes done, bytes total) reaches onProgress
// through a thread-safe function; cancel() makes the engine's progress callback return
// nonzero, so the open stops at its next report (K3_ERR_CANCELLED) or, if it reports no
// more, is discarded when it returns.

struct OpenProgress {
    std::mutex mu;
    std::string phase;
    uint64_t done = 0, total = 0;
    bool callQueued = false;
};

class OpenJob : public Napi::AsyncWorker {
  public:
    OpenJob(Napi::Env env, std::string dir, std::string preset, std::shared_ptr<std::atomic<bool>> cancelled)
        : Napi::AsyncWorker(env, "k3-open"), dir_(std::move(dir)), preset_(std::move(preset)),
          cancelled_(std::move(cancelled)), deferred_(Napi::Promise::Deferred::New(env)) {}

    Napi::Promise Promise() { return deferred_.Promise(); }

    void SetProgress(Napi::Env env, Napi::Function fn) {
        tsfn_ = Napi::ThreadSafeFunction::New(env, fn, "k3-open-progress", 0, 1);
        hasProgress_ = true;
    }

  protected:
    void Execute() override {
        k3_model_params params;
        k3_model_params_default(&params);
        status_ = k3_preset_resolve(preset_.c_str(), dir_.c_str(), nullptr, &params, detail_, sizeof detail_);
        if (status_ != K3_OK)
            return;
        params.progress = &OpenJob::OnProgress;
        params.progress_user = this;
        status_ = OpenModelHandle(dir_.c_str(), &params, &model_, detail_, sizeof detail_);
    }

    void OnOK() override {
        Napi::Env env = Env();
        if (hasProgress_)
            tsfn_.Release();
        if (status_ == K3_OK && cancelled_->load()) {
            k3_model_close(model_);
            deferred_.Reject(MakeK3Error(env, K3_ERR_CANCELLED, "the model load was cancelled").Value());
        } else if (status_ == K3_OK) {
            deferred_.Resolve(WrapModel(env, model_));
        } else {
            deferred_.Reject(MakeK3Error(env, status_, detail_).Value());
        }
    }

  private:
    // Opening thread: passes the latest report on (coalesced) and answers cancel().
    static int OnProgress(void *user, const char *phase, uint64_t done, uint64_t total) {
        auto *job = static_cast<OpenJob *>(user);
        if (job->hasProgress_) {
            std::shared_ptr<OpenProgress> p = job->progress_;
            bool queue = false;
            {
                std::lock_guard<std::mutex> lock(p->mu);
                p->phase = phase ? phase : "";
                p->done = done;
                p->total = total;
                if (!p->callQueued)
                    queue = p->callQueued = true;
            }
            if (queue)
                job->tsfn_.NonBlockingCall([p](Napi::Env env, Napi::Function fn) {
                    std::string phase;
                    uint64_t d, t;
                    {
                        std::lock_guard<std::mutex> lock(p->mu);
                        phase = p->phase;
                        d = p->done;
                        t = p->total;
                        p->callQueued = false;
                    }
                    Napi::Object o = Napi::Object::New(env);
                    o.Set("phase", phase);
                    o.Set("bytesDone", static_cast<double>(d));
                    o.Set("bytesTotal", static_cast<double>(t));
                    fn.Call({o});
                });
        }
        return job->cancelled_->load() ? 1 : 0;
    }

    std::string dir_, preset_;
    std::shared_ptr<std::atomic<bool>> cancelled_;
    Napi::Promise::Deferred deferred_;
    Napi::ThreadSafeFunction tsfn_;
    bool hasProgress_ = false;
    std::shared_ptr<OpenProgress> progress_ = std::make_shared<OpenProgress>();
    k3_model *model_ = nullptr;
    k3_status status_ = K3_OK;
    char detail_[2048] = "";
};

Napi::Value OpenModel(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !(info[1].IsUndefined() || info[1].IsObject())) {
        Napi::TypeError::New(env, "openModel(dir, options): dir must be a string, options an object")
            .ThrowAsJavaScriptException();
        return env.Undefined();
    }
    std::string preset = "mapped";
    Napi::Value onProgress = env.Undefined();
    if (info[1].IsObject()) {
        Napi::Object o = info[1].As<Napi::Object>();
        if (o.Get("preset").IsString() && !o.Get("preset").As<Napi::String>().Utf8Value().empty())
            preset = o.Get("preset").As<Napi::String>().Utf8Value();
        onProgress = o.Get("onProgress");
    }
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    auto *job = new OpenJob(env, info[0].As<Napi::String>().Utf8Value(), preset, cancelled);
    if (onProgress.IsFunction())
        job->SetProgress(env, onProgress.As<Napi::Function>());
    Napi::Object out = Napi::Object::New(env);
    out.Set("promise", job->Promise());
    out.Set("cancel", Napi::Function::New(
                          env, [cancelled](const Napi::CallbackInfo &ci) -> Napi::Value {
                              cancelled->store(true);
                              return ci.Env().Undefined();
                          },
                          "cancel"));
    job->Queue();
    return out;
}

// modelPlan(model, { maxContext?, batch? }) -> { recurrentState, kvCache, buffers, contextTotal,
// modelTotal, total, available, fits }: what a context of that size needs (k3_model_plan).
Napi::Value ModelPlan(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    k3_model *m = info[0].IsObject() ? ModelHandle(env, info[0].As<Napi::Object>()) : nullptr;
    if (!m) {
        if (!env.IsExceptionPending())
            Napi::TypeError::New(env, "modelPlan(model, options): model must be a Model").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    k3_context_params cp;
    k3_context_params_default(&cp);
    if (info[1].IsObject()) {
        cp.max_context = IntOption(info[1].As<Napi::Object>(), "maxContext", cp.max_context);
        cp.batch = IntOption(info[1].As<Napi::Object>(), "batch", cp.batch);
    }
    k3_plan plan;
    k3_model_plan(m, &cp, &plan);
    Napi::Object o = Napi::Object::New(env);
    o.Set("recurrentState", static_cast<double>(plan.recurrent_state));
    o.Set("kvCache", static_cast<double>(plan.kv_cache));
    o.Set("buffers", static_cast<double>(plan.buffers));
    o.Set("contextTotal", static_cast<double>(plan.context_total));
    o.Set("modelTotal", static_cast<double>(plan.model_total));
    o.Set("total", static_cast<double>(plan.total));
    o.Set("available", static_cast<double>(plan.available));
    o.Set("fits", plan.fits != 0);
    return o;
}

// presets() -> [{ name, trunkBytes, expertCacheBytes, fullScalePeakRss, fullScalePlan, note }]:
// the engine's table, no I/O (the server asks for it with every status).
Napi::Value Presets(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    const int n = k3_preset_count();
    Napi::Array out = Napi::Array::New(env, static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        const k3_preset *p = k3_preset_at(i);
        Napi::Object o = Napi::Object::New(env);
        o.Set("name", p->name ? p->name : "");
        o.Set("trunkBytes", static_cast<double>(p->trunk_bytes));
        o.Set("expertCacheBytes", static_cast<double>(p->expert_cache_bytes));
        o.Set("fullScalePeakRss", static_cast<double>(p->full_scale_peak_rss));
        o.Set("fullScalePlan", static_cast<double>(p->full_scale_plan));
        o.Set("note", p->note ? p->note : "");
        out.Set(static_cast<uint32_t>(i), o);
    }
    return out;
}

// The forecast for the full release with preset p's budgets, from this machine's profile
// (k3_forecast_make's default path); false without one, with a bad one, or for budgets it
// cannot forecast.
static bool ForecastPreset(const k3_preset *p, k3_forecast *fc) {
    k3_model_params mp;
    k3_model_params_default(&mp);
    k3_preset_apply(p, &mp);
    char detail[512];
    return k3_forecast_make(nullptr, nullptr, &mp, 1, fc, detail, sizeof detail) == K3_OK;
}

// presetForecasts() -> { [name]: seconds per token of the full release with that preset's
// budgets on this machine }, from its measured profile (k3_forecast_make's default path);
// empty when there is none. Reads the profile, so it is asked for only when the presets are
// listed for a person to choose.
Napi::Value PresetForecasts(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    for (int i = 0; i < k3_preset_count(); i++) {
        const k3_preset *p = k3_preset_at(i);
        k3_forecast fc;
        if (ForecastPreset(p, &fc))
            out.Set(p->name ? p->name : "", fc.seconds);
    }
    return out;
}

// presetFirstTokens() -> { [name]: [{ tokens, seconds, batch, passes }] }: time to first token
// of the full release for a 512- and a 2,048-token prompt with that preset's budgets on this
// machine (k3_forecast_prefill, the batch the plan allows here); empty without a profile.
Napi::Value PresetFirstTokens(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    static const int lengths[2] = {512, 2048};
    for (int i = 0; i < k3_preset_count(); i++) {
        const k3_preset *p = k3_preset_at(i);
        k3_model_params mp;
        k3_model_params_default(&mp);
        k3_preset_apply(p, &mp);
        Napi::Array rows = Napi::Array::New(env);
        for (int j = 0; j < 2; j++) {
            k3_prefill_forecast pf;
            char detail[512];
            if (k3_forecast_prefill(nullptr, nullptr, &mp, lengths[j], K3_BATCH_AUTO, -1.0, &pf, detail,
                                    sizeof detail) != K3_OK)
                break;
            Napi::Object o = Napi::Object::New(env);
            o.Set("tokens", pf.tokens);
            o.Set("seconds", pf.seconds);
            o.Set("batch", pf.batch);
            o.Set("passes", pf.passes);
            rows.Set(j, o);
        }
        if (rows.Length() == 2)
            out.Set(p->name ? p->name : "", rows);
    }
    return out;
}

// forecastCheck() -> { configurations, within, worst } | null: how the forecast did where the
// default profile was measured (k3_forecast's check_*, the same in every forecast of one
// profile): forecast against measured on that many configurations of the slice, how many
// within 15 %, the largest miss as a fraction; null without a profile or when it records
// no check.
Napi::Value ForecastCheck(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    for (int i = 0; i < k3_preset_count(); i++) {
        k3_forecast fc;
        if (!ForecastPreset(k3_preset_at(i), &fc))
            continue;
        if (fc.check_configurations <= 0)
            break;
        Napi::Object o = Napi::Object::New(env);
        o.Set("configurations", fc.check_configurations);
        o.Set("within", fc.check_within);
        o.Set("worst", fc.check_worst);
        return o;
    }
    return env.Null();
}

// ---- Session ------------------------------------------------------------------------------

class Session;

// One long call on a session's context, run on a worker thread; its promise settles on the
// JS thread with Result() or with the engine's error.
class Job : public Napi::AsyncWorker {
  public:
    Job(Napi::Object receiver, Session *session);
    Napi::Promise Promise() { return deferred_.Promise(); }

  protected:
    void Execute() override;
    void OnOK() override;
    // The engine call itself (worker thread).
    virtual k3_status Call(k3_context *ctx) = 0;
    // The resolved value (JS thread).
    virtual Napi::Value Result(Napi::Env env) { return env.Undefined(); }
    // Runs first on the JS thread when the call has returned (delivering the last tokens).
    virtual void Settle(Napi::Env) {}
    // Extra fields for the rejection.
    virtual void Decorate(Napi::Error &) {}
    // True when a call that returned K3_OK was in fact ended by cancel() (generation stops
    // at the token callback, before the engine looks at its own flag).
    virtual bool EndedByCancel() { return false; }

    Session *session_;

  private:
    Napi::ObjectReference self_; // keeps the Session alive while its call runs
    Napi::Promise::Deferred deferred_;
    k3_status status_ = K3_OK;
    std::string detail_;
};

class Session : public Napi::ObjectWrap<Session> {
  public:
    static void Register(Napi::Env env, Napi::Object exports) {
        Napi::Function ctor = DefineClass(env, "Session",
                                          {
                                              InstanceMethod<&Session::Sync>("sync"),
                                              InstanceMethod<&Session::Generate>("generate"),
                                              InstanceMethod<&Session::Checkpoint>("checkpoint"),
                                              InstanceMethod<&Session::SaveState>("saveState"),
                                              InstanceMethod<&Session::LoadState>("loadState"),
                                              InstanceMethod<&Session::Reset>("reset"),
                                              InstanceMethod<&Session::Stop>("stop"),
                                              InstanceMethod<&Session::Cancel>("cancel"),
                                              InstanceMethod<&Session::Close>("close"),
                                              InstanceMethod<&Session::SetCheckpointLimit>("setCheckpointLimit"),
                                              InstanceMethod<&Session::CheckpointUsage>("checkpointUsage"),
                                              InstanceAccessor<&Session::Busy>("busy"),
                                              InstanceAccessor<&Session::Length>("length"),
                                              InstanceAccessor<&Session::Tokens>("tokens"),
                                          });
        exports.Set("Session", ctor);
    }

    // new Session(model, { maxContext?, threads?, batch? })
    explicit Session(const Napi::CallbackInfo &info) : Napi::ObjectWrap<Session>(info) {
        Napi::Env env = info.Env();
        k3_model *m = info[0].IsObject() ? ModelHandle(env, info[0].As<Napi::Object>()) : nullptr;
        if (!m) {
            if (!env.IsExceptionPending())
                Napi::TypeError::New(env, "new Session(model, options): model must be a Model").ThrowAsJavaScriptException();
            return;
        }
        k3_context_params p;
        k3_context_params_default(&p);
        if (info[1].IsObject()) {
            Napi::Object o = info[1].As<Napi::Object>();
            p.max_context = IntOption(o, "maxContext", p.max_context);
            p.n_threads = IntOption(o, "threads", p.n_threads);
            p.batch = IntOption(o, "batch", p.batch);
        }
        char detail[2048] = "";
        k3_status s = k3_context_open(m, &p, &ctx_, detail, sizeof detail);
        if (s != K3_OK) {
            ThrowK3Error(env, s, detail);
            return;
        }
        modelRef_ = Napi::Persistent(info[0].As<Napi::Object>());
        maxContext_ = p.max_context;
    }

    ~Session() override { k3_context_close(ctx_); }

    // Worker thread: runs call() unless the job was cancelled before it started.
    k3_status Run(const std::function<k3_status()> &call, std::string &detail) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (cancelRequested_) {
                detail = "cancelled before it started";
                return K3_ERR_CANCELLED;
            }
            inCall_ = true;
        }
        const k3_status st = call();
        std::lock_guard<std::mutex> lock(mu_);
        inCall_ = false;
        if (st != K3_OK)
            detail = k3_context_error(ctx_);
        return st;
    }

    // JS thread, when a job's call has returned.
    void Finish() { busy_ = false; }

    // Counts a token before JS can see it, so cancel() can say how many the running call
    // had emitted when it was asked.
    void CountToken() { emitted_.fetch_add(1); }

    // The token callback's answer: nonzero stops generation after this token.
    bool StopRequested() const { return stop_.load(); }

    bool CancelRequested() {
        std::lock_guard<std::mutex> lock(mu_);
        return cancelRequested_;
    }

  private:
    friend class Job;

    // Checks that a job may start; throws and returns false otherwise. Clears the flags of
    // the previous job (on the JS thread, so a cancel() right after the call counts).
    bool BeginJob(Napi::Env env) {
        if (!ctx_) {
            Napi::Error::New(env, "the session is closed").ThrowAsJavaScriptException();
            return false;
        }
        if (busy_) {
            Napi::Error::New(env, "the session is busy: one call at a time").ThrowAsJavaScriptException();
            return false;
        }
        std::lock_guard<std::mutex> lock(mu_);
        cancelRequested_ = false;
        stop_ = false;
        emitted_ = 0;
        busy_ = true;
        return true;
    }

    bool Idle(Napi::Env env) {
        if (!ctx_)
            Napi::Error::New(env, "the session is closed").ThrowAsJavaScriptException();
        else if (busy_)
            Napi::Error::New(env, "the session is busy: one call at a time").ThrowAsJavaScriptException();
        return ctx_ && !busy_;
    }

    Napi::Value Sync(const Napi::CallbackInfo &info);
    Napi::Value Generate(const Napi::CallbackInfo &info);
    Napi::Value Checkpoint(const Napi::CallbackInfo &info);
    Napi::Value SaveState(const Napi::CallbackInfo &info);
    Napi::Value LoadState(const Napi::CallbackInfo &info);
    Napi::Value StateCall(const Napi::CallbackInfo &info, bool save);

    // reset(): forgets the sequence (checkpoints stay). Synchronous: it is cheap.
    Napi::Value Reset(const Napi::CallbackInfo &info) {
        if (Idle(info.Env()))
            k3_context_reset(ctx_);
        return info.Env().Undefined();
    }

    // stop(): generation ends after the token being produced; other calls are unaffected.
    Napi::Value Stop(const Napi::CallbackInfo &info) {
        stop_ = true;
        return info.Env().Undefined();
    }

    // cancel(): the running call (prefill or generation) stops at the engine's next check,
    // within one forward pass, and its promise rejects with code "cancelled". Returns the
    // tokens the running generation had emitted at that moment (0 for other calls): what
    // reached JS may lag behind, as tokens travel through a thread-safe function.
    Napi::Value Cancel(const Napi::CallbackInfo &info) {
        std::lock_guard<std::mutex> lock(mu_);
        if (busy_) {
            cancelRequested_ = true;
            stop_ = true;
            if (inCall_)
                k3_cancel(ctx_);
        }
        return Napi::Number::New(info.Env(), static_cast<double>(emitted_.load()));
    }

    Napi::Value Close(const Napi::CallbackInfo &info) {
        if (busy_) {
            Napi::Error::New(info.Env(), "close(): the session is busy; cancel it and await its call first")
                .ThrowAsJavaScriptException();
            return info.Env().Undefined();
        }
        k3_context_close(ctx_);
        ctx_ = nullptr;
        modelRef_.Reset();
        return info.Env().Undefined();
    }

    Napi::Value SetCheckpointLimit(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Idle(env))
            return env.Undefined();
        if (!info[0].IsNumber() || info[0].As<Napi::Number>().DoubleValue() < 0) {
            Napi::TypeError::New(env, "setCheckpointLimit(bytes): bytes must be a number >= 0").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        k3_checkpoint_limit(ctx_, static_cast<size_t>(info[0].As<Napi::Number>().DoubleValue()));
        return env.Undefined();
    }

    // checkpointUsage(): { count, bytes }
    Napi::Value CheckpointUsage(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Idle(env))
            return env.Undefined();
        int count = 0;
        size_t bytes = 0;
        k3_checkpoint_usage(ctx_, &count, &bytes);
        Napi::Object o = Napi::Object::New(env);
        o.Set("count", count);
        o.Set("bytes", static_cast<double>(bytes));
        return o;
    }

    Napi::Value Busy(const Napi::CallbackInfo &info) { return Napi::Boolean::New(info.Env(), busy_); }

    Napi::Value Length(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        return Idle(env) ? Napi::Number::New(env, k3_context_length(ctx_)) : env.Undefined();
    }

    Napi::Value Tokens(const Napi::CallbackInfo &info) {
        Napi::Env env = info.Env();
        if (!Idle(env))
            return env.Undefined();
        const int n = k3_context_length(ctx_);
        Napi::Int32Array out = Napi::Int32Array::New(env, static_cast<size_t>(n));
        if (n > 0)
            std::memcpy(out.Data(), k3_context_tokens(ctx_), sizeof(int32_t) * static_cast<size_t>(n));
        return out;
    }

    k3_context *ctx_ = nullptr;
    Napi::ObjectReference modelRef_;
    int maxContext_ = 0;
    bool busy_ = false; // JS thread only
    std::mutex mu_;     // guards the four flags below
    bool inCall_ = false;
    bool cancelRequested_ = false;
    std::atomic<bool> stop_{false};
    std::atomic<int> emitted_{0}; // tokens the running generation emitted (reset per call)
};

Job::Job(Napi::Object receiver, Session *session)
    : Napi::AsyncWorker(receiver.Env(), "k3-job"), session_(session), self_(Napi::Persistent(receiver)),
      deferred_(Napi::Promise::Deferred::New(receiver.Env())) {}

void Job::Execute() {
    status_ = session_->Run([this]() { return Call(session_->ctx_); }, detail_);
    if (status_ == K3_OK && session_->CancelRequested() && EndedByCancel()) {
        status_ = K3_ERR_CANCELLED;
        detail_ = "cancelled";
    }
}

void Job::OnOK() {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    session_->Finish();
    Settle(env);
    if (status_ == K3_OK) {
        deferred_.Resolve(Result(env));
        return;
    }
    Napi::Error e = MakeK3Error(env, status_, detail_.c_str());
    Decorate(e);
    deferred_.Reject(e.Value());
}

// sync(ids) -> Promise<{ reused, length }>
class SyncJob : public Job {
  public:
    SyncJob(Napi::Object receiver, Session *s, std::vector<int32_t> ids) : Job(receiver, s), ids_(std::move(ids)) {}

  protected:
    k3_status Call(k3_context *ctx) override {
        k3_status st = k3_sync(ctx, ids_.data(), static_cast<int>(ids_.size()), &reused_);
        length_ = k3_context_length(ctx);
        return st;
    }
    Napi::Value Result(Napi::Env env) override {
        Napi::Object o = Napi::Object::New(env);
        o.Set("reused", reused_);
        o.Set("length", length_);
        return o;
    }
    void Decorate(Napi::Error &e) override { e.Set("length", Napi::Number::New(Env(), length_)); }

  private:
    std::vector<int32_t> ids_;
    int reused_ = 0;
    int length_ = 0;
};

// Tokens produced on the worker thread, waiting for the JS thread. Shared with the
// thread-safe function's calls, which may run after the job is gone.
struct TokenQueue {
    std::mutex mu;
    std::vector<int32_t> pending;
    bool callQueued = false;

    // JS thread: hands every waiting token to fn, in order.
    static void Drain(const std::shared_ptr<TokenQueue> &q, Napi::Env env, Napi::Function fn) {
        std::vector<int32_t> ids;
        {
            std::lock_guard<std::mutex> lock(q->mu);
            ids.swap(q->pending);
            q->callQueued = false;
        }
        if (ids.empty() || fn.IsEmpty())
            return;
        Napi::Int32Array a = Napi::Int32Array::New(env, ids.size());
        std::memcpy(a.Data(), ids.data(), ids.size() * sizeof(int32_t));
        fn.Call({a});
    }
};

// generate({ maxTokens, specMax, stopIds, contextIds }, onTokens) -> Promise<stats>
class GenerateJob : public Job {
  public:
    GenerateJob(Napi::Object receiver, Session *s, Napi::Function onTokens) : Job(receiver, s) {
        Napi::Env env = receiver.Env();
        k3_generate_params_default(&params_);
        callback_ = Napi::Persistent(onTokens);
        tsfn_ = Napi::ThreadSafeFunction::New(env, onTokens, "k3-tokens", 0, 1);
    }

    k3_generate_params params_;
    std::vector<int32_t> stopIds_, contextIds_;
    std::string heal_;                 // the bytes healing must spell
    Napi::ObjectReference tokenizer_;  // the JS Tokenizer held while healing (empty otherwise)

    // Healing with `tok`, held (TokenizerHold) from `tokenizer` until Settle releases it.
    void SetHeal(Napi::Object tokenizer, k3_tokenizer *tok, Napi::Uint8Array bytes) {
        tokenizer_ = Napi::Persistent(tokenizer);
        heal_.assign(reinterpret_cast<const char *>(bytes.Data()), bytes.ByteLength());
        params_.tokenizer = tok;
    }

  protected:
    k3_status Call(k3_context *ctx) override {
        k3_generate_params p = params_;
        p.stop_ids = stopIds_.empty() ? nullptr : stopIds_.data();
        p.n_stop_ids = static_cast<int>(stopIds_.size());
        p.context_ids = contextIds_.empty() ? nullptr : contextIds_.data();
        p.n_context_ids = static_cast<int>(contextIds_.size());
        p.on_token = &GenerateJob::OnToken;
        p.user = this;
        p.heal = heal_.empty() ? nullptr : heal_.data();
        p.heal_len = heal_.size();
        k3_generate_stats run = {};
        k3_status st = k3_generate(ctx, &p, &run);
        stats_.emitted += run.emitted;
        stats_.forward_passes += run.forward_passes;
        stats_.rounds += run.rounds;
        stats_.drafted += run.drafted;
        stats_.accepted += run.accepted;
        stats_.stop_reason = run.stop_reason;
        stats_.healed += run.healed;
        return st;
    }

    void Settle(Napi::Env env) override {
        TokenQueue::Drain(queue_, env, callback_.Value());
        tsfn_.Release();
        callback_.Reset();
        if (!tokenizer_.IsEmpty()) {
            TokenizerRelease(tokenizer_.Value());
            tokenizer_.Reset();
        }
    }

    Napi::Value Result(Napi::Env env) override { return Stats(env); }
    void Decorate(Napi::Error &e) override { e.Set("stats", Stats(Env())); }
    bool EndedByCancel() override { return stats_.stop_reason == K3_STOP_CALLBACK; }

  private:
    static int OnToken(void *user, int32_t id) {
        auto *job = static_cast<GenerateJob *>(user);
        job->session_->CountToken();
        std::shared_ptr<TokenQueue> q = job->queue_;
        bool queueCall = false;
        {
            std::lock_guard<std::mutex> lock(q->mu);
            q->pending.push_back(id);
            if (!q->callQueued)
                queueCall = q->callQueued = true;
        }
        if (queueCall)
            job->tsfn_.NonBlockingCall([q](Napi::Env env, Napi::Function fn) { TokenQueue::Drain(q, env, fn); });
        return job->session_->StopRequested() ? 1 : 0;
    }

    Napi::Object Stats(Napi::Env env) {
        static const char *const reasons[] = {"length", "token", "callback"};
        Napi::Object o = Napi::Object::New(env);
        o.Set("emitted", stats_.emitted);
        o.Set("forwardPasses", stats_.forward_passes);
        o.Set("rounds", stats_.rounds);
        o.Set("drafted", stats_.drafted);
        o.Set("accepted", stats_.accepted);
        o.Set("healed", stats_.healed);
        const int r = static_cast<int>(stats_.stop_reason);
        o.Set("stopReason", r >= 0 && r <= 2 ? reasons[r] : "length");
        return o;
    }

    std::shared_ptr<TokenQueue> queue_ = std::make_shared<TokenQueue>();
    Napi::FunctionReference callback_;
    Napi::ThreadSafeFunction tsfn_;
    k3_generate_stats stats_ = {};
};

// checkpoint() -> Promise<void>
class CheckpointJob : public Job {
  public:
    using Job::Job;

  protected:
    k3_status Call(k3_context *ctx) override { return k3_checkpoint(ctx); }
};

// saveState(path) / loadState(path) -> Promise<{ length }>
class StateJob : public Job {
  public:
    StateJob(Napi::Object receiver, Session *s, std::string path, bool save)
        : Job(receiver, s), path_(std::move(path)), save_(save) {}

  protected:
    k3_status Call(k3_context *ctx) override {
        k3_status st = save_ ? k3_state_save(ctx, path_.c_str()) : k3_state_load(ctx, path_.c_str());
        length_ = k3_context_length(ctx);
        return st;
    }
    Napi::Value Result(Napi::Env env) override {
        Napi::Object o = Napi::Object::New(env);
        o.Set("length", length_);
        return o;
    }

  private:
    std::string path_;
    bool save_;
    int length_ = 0;
};

Napi::Value Session::Sync(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    std::vector<int32_t> ids;
    if (!ReadIds(env, info[0], "sync(ids): ids", ids) || !BeginJob(env))
        return env.Undefined();
    auto *job = new SyncJob(info.This().As<Napi::Object>(), this, std::move(ids));
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
}

Napi::Value Session::Generate(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!info[0].IsObject() || !info[1].IsFunction()) {
        Napi::TypeError::New(env, "generate(options, onTokens): options must be an object and onTokens a function")
            .ThrowAsJavaScriptException();
        return env.Undefined();
    }
    Napi::Object o = info[0].As<Napi::Object>();
    std::vector<int32_t> stopIds, contextIds;
    if ((!o.Get("stopIds").IsUndefined() && !ReadIds(env, o.Get("stopIds"), "options.stopIds", stopIds)) ||
        (!o.Get("contextIds").IsUndefined() && !ReadIds(env, o.Get("contextIds"), "options.contextIds", contextIds)))
        return env.Undefined();
    // heal: { bytes: Uint8Array, tokenizer: Tokenizer } (token healing, k3.h).
    Napi::Value heal = o.Get("heal");
    const bool healing = !heal.IsUndefined() && !heal.IsNull();
    if (healing && (!heal.IsObject() || !heal.As<Napi::Object>().Get("bytes").IsTypedArray() ||
                    heal.As<Napi::Object>().Get("bytes").As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
                    !heal.As<Napi::Object>().Get("tokenizer").IsObject())) {
        Napi::TypeError::New(env, "options.heal must be { bytes: Uint8Array, tokenizer: Tokenizer }").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    Napi::Object tokenizer = healing ? heal.As<Napi::Object>().Get("tokenizer").As<Napi::Object>() : Napi::Object();
    k3_tokenizer *tok = healing ? TokenizerHold(env, tokenizer) : nullptr;
    if (healing && !tok)
        return env.Undefined();
    if (!BeginJob(env)) {
        if (healing)
            TokenizerRelease(tokenizer);
        return env.Undefined();
    }
    auto *job = new GenerateJob(info.This().As<Napi::Object>(), this, info[1].As<Napi::Function>());
    if (healing)
        job->SetHeal(tokenizer, tok, heal.As<Napi::Object>().Get("bytes").As<Napi::Uint8Array>());
    job->params_.max_tokens = IntOption(o, "maxTokens", job->params_.max_tokens);
    job->params_.spec_max = IntOption(o, "specMax", job->params_.spec_max);
    job->stopIds_ = std::move(stopIds);
    job->contextIds_ = std::move(contextIds);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
}

Napi::Value Session::Checkpoint(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    if (!BeginJob(env))
        return env.Undefined();
    auto *job = new CheckpointJob(info.This().As<Napi::Object>(), this);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
}

Napi::Value Session::StateCall(const Napi::CallbackInfo &info, bool save) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        Napi::TypeError::New(env, save ? "saveState(path): path must be a string" : "loadState(path): path must be a string")
            .ThrowAsJavaScriptException();
        return env.Undefined();
    }
    if (!BeginJob(env))
        return env.Undefined();
    auto *job = new StateJob(info.This().As<Napi::Object>(), this, info[0].As<Napi::String>().Utf8Value(), save);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
}

Napi::Value Session::SaveState(const Napi::CallbackInfo &info) { return StateCall(info, true); }
Napi::Value Session::LoadState(const Napi::CallbackInfo &info) { return StateCall(info, false); }

} // namespace

void RegisterSession(Napi::Env env, Napi::Object exports) {
    exports.Set("openModel", Napi::Function::New(env, OpenModel, "openModel"));
    exports.Set("presets", Napi::Function::New(env, Presets, "presets"));
    exports.Set("presetForecasts", Napi::Function::New(env, PresetForecasts, "presetForecasts"));
    exports.Set("forecastCheck", Napi::Function::New(env, ForecastCheck, "forecastCheck"));
    exports.Set("presetFirstTokens", Napi::Function::New(env, PresetFirstTokens, "presetFirstTokens"));
    exports.Set("modelPlan", Napi::Function::New(env, ModelPlan, "modelPlan"));
    Session::Register(env, exports);
}
