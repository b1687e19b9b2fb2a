// src/cuda/selection_ledger.cu — the GPU model's MoE selection ledger (memra/model.h
// Model::attach_ledger; memra/selection_ledger.h).
//
// The rows are the route kernel's own outputs (ws.ids, ws.wts) copied after each MoE layer of
// the walk by one small launch (cuda/moe.cuh moe_ledger_record_run), eager and captured alike:
// the ledger shows what the step that produced the logits decided, not a recomputation. The
// launch reads the row positions from the sequence's device position, so a graph replayed at a
// later position records that position. The ring is sized before each call for the rows it can
// write (ledger_reserve) and drained after the call's results come back (ledger_drain), so it
// never wraps onto undrained rows; a ring that would is an error, not a silent loss. Each
// pipeline stage records its own layers into a ring on its device; a drain reads them in stage
// order, so a decode step's rows come in layer order as an unsplit model's (a call of several
// steps: per stage; compare through SelectionLedger::ordered()).
#include <algorithm>

#include "cuda/model_impl.h"
#include "memra/error.h"

namespace memra {

int64_t Model::Impl::moe_layers() const { return std::count(c.ffn_kind.begin(), c.ffn_kind.end(), FfnKind::Moe); }

void Model::Impl::ledger_reserve(int64_t rows) {
  if (!ledger || static_cast<int64_t>(ledger_ring.size()) >= rows) return;
  ledger_ring = DeviceBuffer<cuda::LedgerRow>(*e, static_cast<size_t>(std::max<int64_t>(rows, 4096)));
  ++ws.gen;  // captured graphs hold the old ring's address
}

void Model::Impl::ledger_record(int64_t li, std::span<const Seq> seqs, int64_t rows) {
  const int k = static_cast<int>(c.n_expert_used);
  for (size_t q = 0; q < seqs.size(); ++q) {
    const int64_t r0 = static_cast<int64_t>(q) * rows;
    cuda::LedgerRecordParams p;
    p.ids = ws.ids.data() + r0 * k;
    p.weights = ws.wts.data() + r0 * k;
    p.k = k;
    p.rows = rows;
    p.pos0 = pos_of(*seqs[q].ci);
    p.layer = static_cast<int32_t>(li);
    p.ring = ledger_ring.data();
    p.cap = static_cast<int64_t>(ledger_ring.size());
    p.count = ledger_count.data();
    cuda::moe_ledger_record_run(p, s);
  }
}

void Model::Impl::ledger_drain() {
  if (!ledger) return;
  for (Impl* st = this; st; st = st->next) {  // each stage's ring in stage order (a split model's)
    unsigned long long count = 0;
    copy_to_host(&count, st->ledger_count.data(), sizeof(count), st->e->stream());
    const unsigned long long cap = st->ledger_ring.size();
    if (count - st->ledger_read > cap)
      fail("selection ledger: ", count - st->ledger_read, " rows since the last drain overflow the ring of ", cap,
           " (a call enqueued more MoE layer steps than it reserved)");
    std::vector<cuda::LedgerRow> ring = st->ledger_ring.download();
    for (unsigned long long i = st->ledger_read; i < count; ++i) {
      const cuda::LedgerRow& r = ring[static_cast<size_t>(i % cap)];
      Selection sel;
      sel.pos = r.pos;
      sel.layer = r.layer;
      sel.experts.assign(r.ids, r.ids + r.k);
      sel.weight_bits.assign(r.weight_bits, r.weight_bits + r.k);
      ledger->rows.push_back(std::move(sel));
    }
    st->ledger_read = count;
  }
}

void Model::attach_ledger(SelectionLedger* ledger) {
  impl_->each_stage([&](Impl& m) {
    if ((ledger == nullptr) != (m.ledger == nullptr)) ++m.ws.gen;  // the record launches come or go
    m.ledger = ledger;
    if (!ledger) return;
    if (m.ledger_count.size() == 0) m.ledger_count = DeviceBuffer<unsigned long long>(*m.e, 1);
    m.ledger_count.fill_bytes(0);
    m.ledger_read = 0;
    m.ledger_reserve(4096);
  });
}

}  // namespace memra
