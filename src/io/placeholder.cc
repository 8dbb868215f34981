// Placeholder so the io layer has a translation unit until its sources land.
