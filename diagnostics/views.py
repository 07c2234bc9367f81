"""Diagnostic pages: the GPU Operator check (read live from the cluster) and the fault table."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cluster.connection import interactive_gateway
from diagnostics.operator_check import check_gpu_operator
from gpus.knowledge import by_layer
from kube import KubeError


@login_required
def troubleshooting(request: HttpRequest) -> HttpResponse:
    """The fault table: symptoms, root causes, how to check, what the portal does."""
    return render(request, "diagnostics/troubleshooting.html", {"layers": by_layer()})


@login_required
def operator_check(request: HttpRequest) -> HttpResponse:
    """The GPU Operator post-install checklist, read live from the cluster."""
    try:
        items = check_gpu_operator(
            interactive_gateway(), namespace=settings.QM_GPU_OPERATOR_NAMESPACE
        )
        error = ""
    except KubeError as exc:
        items, error = [], exc.message
    return render(
        request,
        "diagnostics/operator_check.html",
        {"items": items, "error": error, "namespace": settings.QM_GPU_OPERATOR_NAMESPACE},
    )
