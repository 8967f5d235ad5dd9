"""Lesson 13's family: the Transformer's encoder and decoder reused as BERT, GPT and a Vision Transformer."""
