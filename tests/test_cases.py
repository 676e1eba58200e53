"""Past cases across services: what the indexer imports, the orchestrator finds.

The indexer writes resolved tickets with its passage embedder; the orchestrator queries them with
its own query encoder. Both use the same packaged model and agree on the record's metadata keys;
this test holds them to it, with real models and a real Chroma directory.
"""

from __future__ import annotations

from pathlib import Path

from indexer.cases import CaseStore, open_cases_collection, parse_csv
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from orchestrator.cases import CaseRetriever
from orchestrator.cases import open_cases_collection as open_for_orchestrator
from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder

CASES = "\n".join(
    [
        "id,summary,symptoms,resolution,category,opened_at,resolved_at",
        "IT-101,VPN disconnects every few minutes,"
        '"Drops on hotel and home Wi-Fi, reconnects by itself",'
        "Switched the VPN client to TCP mode in its settings,connectivity,2024-03-01,2024-03-02",
        "IT-102,Account locked after password change,"
        "Phone keeps using the old password for mail,"
        "Removed the mail account from the phone and added it again,account,2024-03-03,",
        "IT-103,Docking station monitors stay black,"
        "Laptop charges but no picture on either screen,"
        "Updated the dock firmware from the vendor tool,peripheral,2024-03-04,2024-03-06",
    ]
)


def test_the_orchestrator_finds_what_the_indexer_imported(tmp_path: Path) -> None:
    indexer_settings = IndexerSettings(data_dir=tmp_path, chroma_host=None)
    store = CaseStore(Embedder(batch_size=8), open_cases_collection(indexer_settings))
    assert store.upsert(parse_csv(CASES).cases).written == 3

    settings = OrchestratorSettings(data_dir=tmp_path, chroma_host=None)
    retriever = CaseRetriever(QueryEncoder(), open_for_orchestrator(settings))

    found = retriever.similar(
        "my vpn keeps dropping when I work from a hotel",
        k=settings.cases_max,
        min_score=settings.cases_min_score,
    )
    assert [case.ticket_id for case in found][:1] == ["IT-101"]
    assert found[0].resolution == "Switched the VPN client to TCP mode in its settings"
    assert found[0].category == "connectivity"
    assert "IT-103" not in {case.ticket_id for case in found}

    unrelated = retriever.similar(
        "how do I enrol in the security awareness course",
        k=settings.cases_max,
        min_score=settings.cases_min_score,
    )
    assert unrelated == []
