#!/usr/bin/env bash
# Regenerates the tokenizer fixtures in tests/fixtures/text/: the test tokenizers
# (make_tokenizers.py), then the expected ids from SentencePiece (make_sp_fixtures.py) and from
# Hugging Face's tokenizers (make_hf_fixtures.mjs, npm package pinned in package-lock.json), and
# the chat templates rendered by Jinja2 (make_chat_fixtures.py).
# Needs the Debian packages sentencepiece, python3-sentencepiece, python3-jinja2, fortunes,
# fortunes-de, fortunes-zh, nodejs and npm.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
/usr/bin/python3 make_tokenizers.py
/usr/bin/python3 make_sp_fixtures.py
/usr/bin/python3 make_chat_fixtures.py
npm ci --silent --no-audit --no-fund
node make_hf_fixtures.mjs
