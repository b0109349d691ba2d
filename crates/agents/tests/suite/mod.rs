mod llm_agent;
