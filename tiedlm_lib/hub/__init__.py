"""Models from the Hugging Face ecosystem: the adapter that reads a causal LM as a depth model (``adapter``), the
``dcp`` command's pieces (``protocol``) and the dense control trained as a Llama (``dense``). Nothing here imports
the paper's machinery."""
