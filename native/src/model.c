/* model.c - the public k3_model handle of k3.h: opening a checkpoint (model_load in
 * weights.c does the binding) and reading its dimensions. */
#include <stdlib.h>

#include "k3.h"
#include "model.h"

k3_status k3_model_open(const char *dir, k3_model **out, char *detail, size_t detail_size) {
    k3_error err = {K3_OK, ""};
    *out = NULL;
    k3_model *km = calloc(1, sizeof *km);
    if (!km) {
        error_set(&err, K3_ERR_OUT_OF_MEMORY, "model handle: out of memory");
        error_copy_detail(&err, detail, detail_size);
        return err.status;
    }
    const k3_status s = model_load(dir, &km->m, &err);
    if (s != K3_OK) {
        free(km);
        error_copy_detail(&err, detail, detail_size);
        return s;
    }
    *out = km;
    return K3_OK;
}

void k3_model_close(k3_model *km) {
    if (km) {
        model_free(km->m);
        free(km);
    }
}

int k3_model_vocab_size(const k3_model *km) {
    return km->m->vocab;
}

int k3_model_hidden_size(const k3_model *km) {
    return km->m->hidden;
}

int k3_model_layer_count(const k3_model *km) {
    return km->m->n_layers;
}

