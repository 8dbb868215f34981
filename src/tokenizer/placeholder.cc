// Placeholder so the tokenizer layer has a translation unit until its sources land.
