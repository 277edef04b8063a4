/*
 * The system as text, in the shape of NCCL's "=== System : ..." log: a tree from each CPU, one
 * line per link ("+ PCI[24.0] - GPU/0000:19:00.0 (0)"), then each GPU's paths.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

typedef struct {
  char* buf;
  size_t len, cap;
  bool failed;
} text_t;

static void text_printf(text_t* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(text_t* t, const char* fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if (t->buf && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 4096;
    while (cap < t->len + (size_t)n + 1) cap *= 2;
    char* b = realloc(t->buf, cap);
    if (b == NULL) {
      t->failed = true;
      return;
    }
    t->buf = b;
    t->cap = cap;
  }
}

static void node_label(const topo_node_t* n, char* buf, size_t size) {
  char b[20];
  switch (n->type) {
    case TOPO_NODE_GPU:
      snprintf(buf, size, "GPU/%s (%d)", topo_busid_str(n->id, b, sizeof(b)), n->gpu.rank);
      break;
    case TOPO_NODE_PCI:
    case TOPO_NODE_NIC:
      if (n->id >> 56) snprintf(buf, size, "%s/virtual-%d", topo_node_type_name(n->type), n->index);
      else snprintf(buf, size, "%s/%s", topo_node_type_name(n->type), topo_busid_str(n->id, b, sizeof(b)));
      break;
    default:
      snprintf(buf, size, "%s/%lld", topo_node_type_name(n->type), (long long)n->id);
      break;
  }
}

/* Depth-first from a CPU; each node is expanded once (seen[]); PCI and NET links back up the
 * tree are not repeated. */
static void print_node(text_t* t, const topo_system_t* sys, const topo_node_t* n,
                       unsigned char* seen, int depth) {
  seen[n->type * TOPO_MAX_NODES + n->index] = 1;
  char label[64];
  for (int l = 0; l < n->nlinks; l++) {
    const topo_link_t* link = &n->links[l];
    const topo_node_t* r = link->rem;
    /* The tree follows PCI and network links; NVLinks are listed, their far ends get their own
     * lines later (NVSwitch) or in their PCI place (GPUs). */
    bool expand = !seen[r->type * TOPO_MAX_NODES + r->index] && r->type != TOPO_NODE_CPU &&
                  link->type != TOPO_LINK_NVL && link->type != TOPO_LINK_SYS;
    /* Skip the link back up the tree (to the node we came from, already printed). */
    if (!expand && link->type == TOPO_LINK_PCI) continue;
    if (!expand && link->type == TOPO_LINK_NET) continue;
    node_label(r, label, sizeof(label));
    text_printf(t, "%*s+ %s[%.1f] - %s", depth * 2, "", topo_link_type_name(link->type),
                (double)link->bw, label);
    if (link->type == TOPO_LINK_NVL) text_printf(t, " x%d", link->count);
    text_printf(t, "\n");
    if (expand) print_node(t, sys, r, seen, depth + 1);
  }
}

ncclResult_t topo_system_format(const topo_system_t* sys, char** text_p) {
  text_t t = {0};
  unsigned char* seen;
  CHECK(MEM_CALLOC(&seen, (size_t)TOPO_NODE_TYPES * TOPO_MAX_NODES));
  text_printf(&t, "=== System : maxBw %.1f totalBw %.1f ===\n", (double)sys->max_bw,
              (double)sys->total_bw);
  char label[64];
  for (int c = 0; c < sys->count[TOPO_NODE_CPU]; c++) {
    const topo_node_t* cpu = &sys->nodes[TOPO_NODE_CPU][c];
    node_label(cpu, label, sizeof(label));
    text_printf(&t, "%s (arch %d vendor %d family %d model %d)\n", label, cpu->cpu.arch,
                cpu->cpu.vendor, cpu->cpu.family, cpu->cpu.model);
    print_node(&t, sys, cpu, seen, 0);
  }
  /* Nodes reachable from no CPU (a tree without <cpu>, an NVSwitch seen only by NVLink). */
  for (int ty = 0; ty < TOPO_NODE_TYPES; ty++) {
    for (int i = 0; i < sys->count[ty]; i++) {
      const topo_node_t* n = &sys->nodes[ty][i];
      if (seen[ty * TOPO_MAX_NODES + i]) continue;
      node_label(n, label, sizeof(label));
      text_printf(&t, "%s\n", label);
      print_node(&t, sys, n, seen, 0);
    }
  }
  text_printf(&t, "==========================================\n");
  for (int g = 0; g < sys->count[TOPO_NODE_GPU]; g++) {
    const topo_node_t* gpu = &sys->nodes[TOPO_NODE_GPU][g];
    node_label(gpu, label, sizeof(label));
    text_printf(&t, "%s :", label);
    static const topo_node_type_t shown[] = {TOPO_NODE_GPU, TOPO_NODE_CPU, TOPO_NODE_NET};
    for (size_t k = 0; k < sizeof(shown) / sizeof(shown[0]); k++) {
      topo_node_type_t ty = shown[k];
      for (int j = 0; j < sys->count[ty]; j++) {
        const topo_path_t* p = &gpu->paths[ty][j];
        text_printf(&t, " %s/%d (%d/%.1f/%s)", topo_node_type_name(ty), j, p->nhops,
                    (double)p->bw, topo_path_type_name(p->type));
      }
    }
    text_printf(&t, "\n");
  }
  free(seen);
  if (t.failed || t.buf == NULL) {
    free(t.buf);
    WARN("out of host memory formatting the topology");
    return ncclSystemError;
  }
  *text_p = t.buf;
  return ncclSuccess;
}

void topo_system_print(const topo_system_t* sys) {
  if (!log_enabled(NCCL_LOG_INFO, NCCL_GRAPH)) return;
  char* text;
  if (topo_system_format(sys, &text) != ncclSuccess) return;
  char* save = NULL;
  for (char* line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
    INFO(NCCL_GRAPH, "%s", line);
  free(text);
}
