"""Which crawlers' opt-outs a run honours: the community list of AI crawler user agents (ai-robots-txt).

`lists/ai_robots.json` is the list at commit 738c80df (2026-08-22; MIT, `lists/ai_robots.LICENSE`): 166 user
agents with their operator and stated function. The default set (`TRAINING_AGENTS`) is the agents whose stated
function is collecting training data: the function names training, LLMs, data sets, machine learning or language
models, or is one of the list's "AI Data Scrapers"; plus CCBot, whose crawl is Common Crawl itself. Search and
assistant agents that fetch a page for a user are left out: a site that blocks them says "do not answer my
readers with my pages", not "do not train on them". `python -m stages.optout.agents` prints the rule's result.
"""
from __future__ import annotations

import json
import os
import re
from functools import cache

from stages.optout.robots import product_token

LIST = os.path.join(os.path.dirname(__file__), "lists", "ai_robots.json")
LIST_VERSION = "ai-robots-txt@738c80df2169027ce0e07c9976fd3f2f57dd8f7b"
_TRAINING = re.compile(r"train|LLM|dataset|data sets|machine learning|language model|AI Data Scrapers|AI data scraper",
                       re.IGNORECASE)

# The rule's result on the list above (a test checks they agree), as product tokens
TRAINING_AGENTS = (
    "AI2Bot", "Ai2Bot-Dolma", "aiHitBot", "anthropic-ai", "Awario", "Brightbot", "Bytespider", "CCBot",
    "ChatGLM-Spider", "ClaudeBot", "CloudVertexBot", "cohere-training-data-crawler", "Cotoyogi", "Datenbank",
    "DeepSeekBot", "Echobot", "FacebookBot", "Factset_spyderbot", "FriendlyCrawler", "Google-Extended", "GPTBot",
    "ICC-Crawler", "imageSpider", "img2dataset", "ISSCyberRiskCrawler", "Kangaroo", "laion-huggingface-processor",
    "LAIONDownloader", "LCC", "Lightpanda", "meta-externalagent", "MyCentralAIScraperBot", "NagetBot", "netEstate",
    "newsai", "PanguBot", "Panscient", "Scrapy", "Sidetrade", "Spider", "TikTokSpider", "Timpibot",
    "VelenPublicWebCrawler", "WARDBot", "Webzio-Extended", "YandexAdditional", "YandexAdditionalBot", "YouBot",
)


@cache
def known_agents() -> dict[str, dict]:
    with open(LIST, encoding="utf-8") as fh:
        return json.load(fh)


def training_agents() -> tuple[str, ...]:
    """The product tokens of the list's training-data crawlers, and CCBot, each once (first spelling kept)."""
    found: dict[str, str] = {}
    for name, facts in sorted(known_agents().items(), key=lambda kv: kv[0].lower()):
        if _TRAINING.search(facts.get("function", "")) or name == "CCBot":
            token = _token_as_written(name)
            found.setdefault(token.lower(), token)
    return tuple(found.values())


def _token_as_written(name: str) -> str:
    return name[:len(product_token(name))]


if __name__ == "__main__":
    print(training_agents())
