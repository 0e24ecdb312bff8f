"""The docs' rendered blocks: where each block goes (blocks) and the Markdown of each, made from committed runs only."""
