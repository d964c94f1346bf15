/* test_heal.c - token healing's two halves on the real K3 tokenizer: where a text's last
 * piece starts (the boundary a prompt is backed off to), and the byte-prefix constraint
 * that chooses the tokens spelling the removed bytes again (heal.c), with chosen logits. */
#include "harness.h"
#include "heal.h"
#include "k3.h"

#include <stdlib.h>
#include <string.h>

#define TOK_DIR "../test/data/kimi-tokenizer"

static k3_tokenizer *tok;

static k3_tokenizer *real(void) {
    if (!tok) {
        char detail[512];
        if (k3_tokenizer_open(TOK_DIR, &tok, detail, sizeof detail) != K3_OK)
            fprintf(stderr, "cannot open %s: %s\n", TOK_DIR, detail);
    }
    return tok;
}

__attribute__((destructor)) static void close_tok(void) {
    k3_tokenizer_close(tok);
}

static size_t last_piece(const char *text) {
    size_t start = 12345;
    if (k3_tokenizer_last_piece(real(), text, strlen(text), &start) != K3_OK)
        return (size_t)-1;
    return start;
}

/* The id of a text that is one token. */
static int32_t id_of(const char *text) {
    int32_t ids[8];
    size_t n = 0;
    if (k3_tokenize(real(), text, strlen(text), 0, ids, 8, &n) != K3_OK || n != 1)
        return -1;
    return ids[0];
}

TEST(heal_last_piece_is_where_typing_more_cannot_move_the_boundary) {
    CHECK(real());
    CHECK_INT(last_piece(""), 0);
    CHECK_INT(last_piece("    "), 0);          /* a whitespace run at the end is one piece */
    CHECK_INT(last_piece("    ret"), 3);       /* "   " + " ret": the space goes with the word */
    CHECK_INT(last_piece("x = foo.ba"), 7);    /* ".ba" (A2 takes one leading punctuation) */
    CHECK_INT(last_piece("total = 12"), 8);    /* " " and "12" are pieces of their own */
    CHECK_INT(last_piece("items.findIndex((item) => "), 25);
    CHECK_INT(last_piece("print(\"hel"), 7);   /* "(\"" is one piece of punctuation, "hel" the next */
    CHECK_INT(last_piece("I don'"), 1);        /* "'t" would join " don": back off over it */
    CHECK_INT(last_piece("don'"), 0);
    CHECK_INT(last_piece("\t\t}"), 1);        /* "\t\t" alone is one piece, before "}" two */
}

TEST(heal_allows_prefixes_of_the_rest_and_tokens_that_spell_it_all_and_go_on) {
    heal h;
    heal_init(&h, real(), "    ", 4);
    const int32_t three = id_of("   "), word = id_of(" return"), four = id_of("    "), one = id_of(" ");
    CHECK(three >= 0 && word >= 0 && four >= 0 && one >= 0);
    CHECK(heal_allows(&h, 0, three));
    CHECK(heal_allows(&h, 0, four));
    CHECK(!heal_allows(&h, 0, word)); /* " ret" is not "    " */
    CHECK(heal_allows(&h, 3, word));  /* after "   ", " return" spells the last space and goes on */
    CHECK(!heal_allows(&h, 0, k3_tokenizer_special_id(real(), "[EOS]")));
    CHECK_INT(heal_advance(&h, 0, three), 3);
    CHECK_INT(heal_advance(&h, 3, word), 4);
    const int32_t draft[3] = {three, word, id_of(" x")};
    CHECK_INT(heal_allowed_prefix(&h, 0, draft, 3), 3); /* the constraint ends inside: the rest is free */
    const int32_t bad[2] = {word, three};
    CHECK_INT(heal_allowed_prefix(&h, 0, bad, 2), 0);
}

TEST(heal_argmax_is_the_best_allowed_token_never_a_special) {
    const int vocab = k3_tokenizer_vocab_size(real());
    float *logits = calloc((size_t)vocab, sizeof *logits);
    CHECK(logits);
    heal h;
    heal_init(&h, real(), "    ", 4);
    const int32_t three = id_of("   "), word = id_of(" return"), eos = k3_tokenizer_special_id(real(), "[EOS]");
    logits[eos] = 100;   /* the model would stop: not while bytes remain */
    logits[word] = 50;   /* not allowed at offset 0 */
    logits[three] = 10;
    CHECK_INT(heal_argmax(&h, 0, logits), three);
    CHECK_INT(heal_argmax(&h, 3, logits), word);
    /* Ties go to the lowest id, as the unconstrained argmax. */
    memset(logits, 0, sizeof *logits * (size_t)vocab);
    const int32_t a = id_of(" "), b = id_of("  ");
    logits[a] = logits[b] = 5;
    CHECK_INT(heal_argmax(&h, 0, logits), a < b ? a : b);
    free(logits);
}
