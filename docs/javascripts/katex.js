// KaTeX (docs/vendor/katex, served with the site: nothing is loaded from the network) typesets the formulas that
// pymdownx.arithmatex (generic mode) leaves in the pages as \( \) and \[ \] inside elements of class "arithmatex";
// nothing else on a page is typeset. Material's instant navigation swaps pages without reloading: document$ emits
// each new page.
document$.subscribe(({ body }) => {
  for (const el of body.querySelectorAll(".arithmatex")) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  }
});
