# frozen_string_literal: true

class ProductsController < ApplicationController
  # The page: every product, each through two partials.
  def index
    @products = Product.order(:id).to_a
  end

  # JSON for one product (and a restock job when it runs low).
  def show
    product = Product.find(params[:id])
    RestockJob.perform_later(product.id) if product.low_stock?
    render json: product.as_json(only: %i[id name description price_cents stock]).merge(price: product.price)
  end

  # A slow request: loads every product and holds them while it waits
  # (SLOW_SECONDS, default 2 s) in the request's own stack; a retention
  # snapshot taken meanwhile must name this request's thread.
  def slow
    records = Product.order(:id).to_a
    SlowRequests.wait(params.fetch(:seconds, "2").to_f)
    render plain: "held #{records.size} products\n"
  end

  # The labels Fathom has set on this thread, in the action and in a job
  # performed here ({} when Fathom's labels are not loaded).
  def labels
    render json: { action: LabelsProbeJob.seen, job: LabelsProbeJob.perform_now }
  end

  # CPU-bound work of ?ms= milliseconds of this thread's CPU clock; the
  # X-Cpu-Ns header is the CPU the action used, as the thread's clock says.
  def burn
    budget = params.fetch(:ms, "20").to_f / 1000
    clock = Process::CLOCK_THREAD_CPUTIME_ID
    start = Process.clock_gettime(clock)
    acc = 0
    acc += (1..200).sum { |i| i * i } while Process.clock_gettime(clock) - start < budget
    response.set_header("X-Cpu-Ns", ((Process.clock_gettime(clock) - start) * 1e9).round.to_s)
    render plain: "#{acc}\n"
  end
end
