// MathJax for the formulas that pymdownx.arithmatex (generic mode) leaves in the pages as \( \) and \[ \] inside
// spans of class "arithmatex"; nothing else on a page is typeset. Material's instant navigation swaps pages
// without reloading, so each new page is typeset again.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

document$.subscribe(() => {
  if (!window.MathJax.typesetPromise) return; // not loaded yet: its own startup typesets the first page
  MathJax.startup.output.clearCache();
  MathJax.typesetClear();
  MathJax.texReset();
  MathJax.typesetPromise();
});
