// addon.cc - the Node binding of the K3 engine: a thin node-addon-api layer that
// converts between JS values and the C API of include/k3.h, and nothing more.
#include <napi.h>

#include "k3.h"

namespace {

Napi::Value Version(const Napi::CallbackInfo &info) {
    return Napi::String::New(info.Env(), k3_version());
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
    exports.Set("version", Napi::Function::New(env, Version, "version"));
    return exports;
}

} // namespace

NODE_API_MODULE(k3, Init)
