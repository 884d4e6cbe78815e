"""The rig's local language model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) served by llama-cpp-python on
127.0.0.1 through an OpenAI-compatible /v1/chat/completions (model.py: the file and its checks; server.py: the
service; setup.py: `make setup-local-llm`)."""
